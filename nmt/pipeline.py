"""The top of the chain: a config becomes a trained run, a checkpoint becomes a report.

`cli` and `study` call these; nothing below imports this module.
"""
from __future__ import annotations

import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from tqdm import tqdm

from nmt.checkpoint import (load_checkpoint, load_model, resolve, step_checkpoints,
                            tokenizer_from_payload)
from nmt.config import Config, dump_yaml, load_config
from nmt.data.batching import BucketBatcher
from nmt.data.corpus import load_split, read_lines, split_lines
from nmt.data.prepared import PreparedCorpus, prepared_corpus
from nmt.distributed import barrier, cleanup, init
from nmt.errors import NmtError
from nmt.evaluate import bucket_bounds
from nmt.files import atomic_write
from nmt.finetune import init_optimizer, init_weights, load_parent
from nmt.models import NMTModel, build_model
from nmt.models.quantize import check_int8_device, quantize_int8
from nmt.precision import decode_precision, resolve_precision
from nmt.train import Trainer, autocast_for, cpu_has_bf16, resolve_device, seed_everything
from nmt.translate import Translation, score_texts, translate_texts
from nmt.unknown_words import warn_unknown

log = logging.getLogger("nmt")
COMPARED_SECTIONS = ("data", "vocab", "model")
# Changing these would make a resumed run differ from the one it continues (batch order, optimiser
# state, gradient scaler, the best score so far), so --resume refuses them; limits, logging,
# validation frequency and lr may change.
FIXED_TRAIN_KEYS = ("seed", "optimizer", "precision", "accum_steps", "schedule",
                    "early_stop_metric")


LOG_TAG = ""  # set per process by `nmt study` when models train side by side


class _AboveProgressBar(logging.StreamHandler):
    """Writes each record on its own line: tqdm.write clears a progress bar drawn on the same
    stream, prints the record and redraws the bar below it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(run_dir: Optional[Path] = None, rank: int = 0) -> None:
    root = logging.getLogger("nmt")
    root.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    for h in list(root.handlers):
        if getattr(h, "_nmt", False):
            root.removeHandler(h)
            h.close()
    tag = f"[{LOG_TAG}] " if LOG_TAG else ""
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {tag}%(message)s", "%H:%M:%S")
    handlers: list[logging.Handler] = [_AboveProgressBar(sys.stderr)]
    if run_dir is not None and rank == 0:
        handlers.append(logging.FileHandler(run_dir / "train.log", encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        h._nmt = True  # type: ignore[attr-defined]
        root.addHandler(h)
    root.propagate = False


def _resume_checkpoint(cfg: Config) -> Path:
    """The checkpoint --resume continues from, after checking the config still fits the run."""
    run = Path(cfg.train.run_dir)
    try:
        ckpt = resolve(run, prefer="latest")
    except NmtError:
        raise NmtError(f"--resume: run directory {run} has no checkpoint to resume") from None
    saved = run / "config.yaml"
    if saved.is_file():
        old = load_config(saved, stored=True)
        for section in COMPARED_SECTIONS:
            if getattr(old, section) != getattr(cfg, section):
                raise NmtError(f"--resume: '{section}' in the config differs from the run in "
                               f"{run} (data, vocab and model must stay as they were)")
        for key in FIXED_TRAIN_KEYS:
            was, now = getattr(old.train, key), getattr(cfg.train, key)
            if key == "precision" and "auto" in (was, now):
                # auto and what it means on this machine are the same run
                dev = resolve_device(cfg.train)
                was, now = resolve_precision(was, dev), resolve_precision(now, dev)
            if was != now:
                raise NmtError(f"--resume: 'train.{key}' is {now!r} but the run in {run} used "
                               f"{was!r}; it cannot change when resuming")
    return ckpt


def _check_run_dir(cfg: Config, overwrite: bool) -> None:
    """Refuse to start over a different run unless --overwrite (nothing is written here)."""
    run = Path(cfg.train.run_dir)
    if overwrite or not run.exists() or not any(run.iterdir()):
        return
    saved = run / "config.yaml"
    same = saved.is_file() and saved.read_text(encoding="utf-8") == dump_yaml(cfg)
    if not same or step_checkpoints(run) or (run / "best.pt").exists():
        raise NmtError(f"run directory {run} already holds a run; pass --resume to continue "
                       f"it or --overwrite to replace it")


def _create_run_dir(cfg: Config, overwrite: bool, tok) -> Path:
    run = Path(cfg.train.run_dir)
    if overwrite and run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    atomic_write(run / "config.yaml", dump_yaml(cfg))
    tok.save(run)
    return run


def describe_precision(cfg: Config, device: torch.device) -> str:
    p = resolve_precision(cfg.train.precision, device)
    if cfg.train.precision == "auto":
        return f"auto: {p} on {device.type}" + (
            "" if p == "fp32" else " (autocast)")
    if p == "fp32":
        return f"fp32 on {device.type}"
    note = ""
    if p == "bf16" and device.type == "cpu" and not cpu_has_bf16():
        note = " (this CPU has no native bf16: expect it to be slow)"
    return f"{p} autocast on {device.type}{note}" + (" with GradScaler" if p == "fp16" else "")


def _valid_batches(cfg: Config, tok, src: list[str], tgt: list[str]) -> list:
    s, t = tok.encode_src(src), tok.encode_tgt(tgt)
    b = BucketBatcher.from_lists(s, t, cfg.data.batch_tokens, cfg.data.batch_size, seed=0,
                                 prefetch=0)
    return [b.batch(ix) for ix in b.epoch(0)]


def _greedy_scorer(cfg: Config, tok, src: list[str], ref: list[str],
                   device: torch.device) -> Callable[[NMTModel], dict]:
    """Validation BLEU and chrF: greedy, exactly what `nmt evaluate --beam 1` computes."""
    def score(model: NMTModel) -> dict:
        with decoding_autocast(cfg, device):
            _, sc = score_texts(model, tok, src, ref, cfg.decode, beam=1,
                                bounds=cfg.eval.buckets, device=device)
        return {"bleu": sc["bleu"], "chrf": sc["chrf"]}
    return score


def _batch_stats(batcher: BucketBatcher) -> str:
    """Batches per epoch, tokens, sentences and padding of epoch 0, from the lengths alone."""
    batches = batcher.epoch(0)
    sizes = np.array([len(b) for b in batches])
    order = np.concatenate(batches)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ls, lt = batcher.src_len[order], batcher.tgt_len[order] + 1
    slots = (sizes * (np.maximum.reduceat(ls, starts) + np.maximum.reduceat(lt, starts))).sum()
    real = ls.sum() + lt.sum()
    return (f"batches per epoch: {len(batches)}, mean {lt.sum() / len(batches):.0f} target "
            f"tokens and {sizes.mean():.1f} sentences per batch, padding "
            f"{100 * (1 - real / slots):.1f}%")


def data_report(cfg: Config, progress: bool = False) -> str:
    """Corpus and batch statistics without training (`nmt train --dry-run`)."""
    corpus = prepared_corpus(cfg, progress)
    tok = corpus.tokenizer
    batcher = corpus.batcher(cfg.data, cfg.train.seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    lines = [corpus.summary(),
             f"subwords: {cfg.vocab.type}, {'joint' if tok.joint else 'separate'} vocabulary, "
             f"source {tok.src_vocab_size} / target {tok.tgt_vocab_size} pieces",
             f"train tokens (kept pairs): source {int(batcher.src_len.sum())}, target "
             f"{int(batcher.tgt_len.sum()) + len(batcher)} (with EOS)",
             _batch_stats(batcher)]
    for role in cfg.data.splits:
        if role != "train":
            src, _ = load_split(cfg.data, role)
            lines.append(f"{role} ({cfg.data.splits[role]}): {len(src)} pairs, unfiltered")
    lines.append(f"model {cfg.model.arch}: {model.num_parameters():,} parameters")
    return "\n".join(lines)


def _training_corpus(cfg: Config, rank: int, ckpt_tok, parent_tok=None) -> PreparedCorpus:
    """Rank 0 prepares (on first use) while the other ranks wait; every rank then maps the same
    files. A resumed run must find the subwords it was trained with; a fine-tuned run (parent_tok)
    is encoded with its parent's."""
    if rank == 0:
        corpus = prepared_corpus(cfg, tokenizer=parent_tok)
        barrier()
    else:
        barrier()
        corpus = prepared_corpus(cfg, tokenizer=parent_tok)
    if ckpt_tok is not None and (ckpt_tok.src_proto, ckpt_tok.tgt_proto) != (
            corpus.tokenizer.src_proto, corpus.tokenizer.tgt_proto):
        raise NmtError(f"--resume: the prepared corpus {corpus.path} was encoded with other "
                       f"subword models than the run's checkpoint; delete it to re-prepare")
    return corpus


@dataclass
class TrainResult:
    run: Path
    stop_reason: str
    interrupted: bool  # stopped by SIGINT/SIGTERM: checkpointed, but not finished


def train(cfg: Config, overwrite: bool = False, resume: bool = False) -> TrainResult:
    """Train a model from a config (or continue it with resume)."""
    dist = init(cfg.train.device, cfg.train.dist_timeout_minutes)
    try:
        if dist.world == 1:
            dist.device = resolve_device(cfg.train)
        autocast_for(cfg.train.precision, dist.device)  # fp16 on CPU fails here, before work
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        # Everything that can fail on user input (run dir, data, subwords, building the model)
        # runs before anything is written, so a mistake leaves no half-made run behind.
        ckpt_path = _resume_checkpoint(cfg) if resume else None
        if not resume and dist.rank == 0:
            _check_run_dir(cfg, overwrite)
        setup_logging(None, dist.rank)
        seed_everything(cfg.train.seed)
        tok = tokenizer_from_payload(load_checkpoint(ckpt_path)["tokenizer"]) if ckpt_path else None
        parent = load_parent(cfg) if cfg.train.init_from and not resume else None
        tok = parent.tokenizer if parent else tok
        # A fine-tuned run is encoded with its parent's subwords (on resume, its checkpoint's:
        # the same ones), never with new ones trained on the new data.
        corpus = _training_corpus(cfg, dist.rank, tok, tok if cfg.train.init_from else None)
        tok = corpus.tokenizer
        valid = load_split(cfg.data, "valid") if "valid" in cfg.data.splits else None
        model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
        run = Path(cfg.train.run_dir)
        if dist.rank == 0:
            run = _create_run_dir(cfg, overwrite and not resume, tok)
        barrier()
        setup_logging(run, dist.rank)
        log.info(corpus.stats.line())
        log.info(f"training corpus: {corpus.path} (memory-mapped)")
        if parent:
            init_weights(model, parent)
        log.info(f"model {cfg.model.arch}: {model.num_parameters():,} trainable parameters")
        log.info(f"precision: {describe_precision(cfg, dist.device)}; device {dist.device}; "
                 f"{torch.get_num_threads()} threads; {dist.world} process(es)")
        batcher = corpus.batcher(cfg.data, cfg.train.seed, dist.rank, dist.world,
                                 pin=dist.device.type == "cuda")
        score_fn, valid_batches = None, []
        if valid is not None and dist.rank == 0:
            valid_batches = _valid_batches(cfg, tok, *valid)
            n = cfg.train.valid_max_sentences or len(valid[0])
            score_fn = _greedy_scorer(cfg, tok, valid[0][:n], valid[1][:n], dist.device)
        trainer = Trainer(cfg, model, tok, batcher, valid_batches, run, dist, score_fn)
        if parent and cfg.train.init_optimizer:
            init_optimizer(trainer, parent)
        if ckpt_path is not None:
            trainer.resume(ckpt_path)
        trainer.train()
        barrier()  # an interrupted run exits non-zero: no rank may leave before rank 0 saved
        return TrainResult(run, trainer.stop_reason or "", trainer.interrupted)
    finally:
        cleanup()


def decoding_device(device: Optional[str], cfg: Config) -> torch.device:
    """`--device` if given (checked), else the device the run trained on where this machine has
    it (a run trained on CUDA decodes on the CPU of a machine without a GPU)."""
    if device is None:
        return torch.device("cuda" if cfg.train.device != "cpu" and torch.cuda.is_available()
                            else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise NmtError(f"--device: expected cpu, cuda or cuda:N, got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise NmtError(f"--device: expected cpu, cuda or cuda:N, got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise NmtError(f"--device {device}: no CUDA device is available (use --device cpu)")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        raise NmtError(f"--device {device}: this machine has {torch.cuda.device_count()} GPU(s)")
    return dev


def decoding_autocast(cfg: Config, device: torch.device):
    """Decoding runs under the run's precision where this device runs it (see
    `nmt.precision.decode_precision`)."""
    return autocast_for(decode_precision(cfg.train.precision, device), device)


def _load_for_decoding(target: str, device: Optional[str], overrides: Optional[dict],
                       int8: bool = False):
    """A checkpoint's config, model, tokenizer and meta, with command-line decode settings;
    meta["device"] is the device the model is on."""
    if int8:
        device = device or "cpu"  # int8 decodes on the CPU whatever the run trained on
        check_int8_device(device)  # before loading anything
    cfg, model, tok, meta = load_model(target, "cpu")
    meta["device"] = decoding_device(device, cfg)
    if int8:
        model = quantize_int8(model)
    model.to(meta["device"])
    for key, value in (overrides or {}).items():
        setattr(cfg.decode, key, value)
    return cfg, model, tok, meta


def evaluate(target: str, split: Optional[str] = None, src_file: Optional[str] = None,
             ref_file: Optional[str] = None, beam: Optional[int] = None,
             report_dir: Optional[str] = None, buckets: Optional[list[int]] = None,
             attention_plots: int = 0, attn_layer: int = -1, attn_head: Optional[int] = None,
             device: Optional[str] = None, progress: bool = True,
             overrides: Optional[dict] = None, int8: bool = False,
             verbose: bool = False) -> tuple[dict, Path]:
    """Decode a split (or --src/--ref files) with a checkpoint; write hyps, scores and plots."""
    from nmt.report import write_report  # matplotlib: imported only when a report is written

    cfg, model, tok, meta = _load_for_decoding(target, device, overrides, int8)
    device = meta["device"]
    if src_file or ref_file:
        if not (src_file and ref_file):
            raise NmtError("--src and --ref must be given together")
        srcs, refs = read_lines(src_file), read_lines(ref_file)
        if len(srcs) != len(refs):
            raise NmtError(f"line counts differ: {src_file} has {len(srcs)} lines, {ref_file} has "
                           f"{len(refs)}")
        name = Path(src_file).stem
    else:
        split = split or cfg.eval.split
        srcs, refs = load_split(cfg.data, split)
        name = split
    if not srcs:
        raise NmtError(f"nothing to evaluate: {name} is empty")
    warn_unknown(tok, srcs, src_file or f"split {name}", verbose)
    bounds = buckets or cfg.eval.buckets
    bucket_bounds(bounds)  # a bad --buckets fails now, not after decoding the whole split
    model.set_attention_view(attn_layer, attn_head)
    k = cfg.decode.beam if beam is None else beam
    with decoding_autocast(cfg, device):
        out, scores = score_texts(model, tok, srcs, refs, cfg.decode, beam=k,
                                  bounds=bounds, device=device,
                                  progress=progress, return_attn=attention_plots > 0)
    scores.update({"checkpoint": meta["path"], "step": meta["step"], "split": name})
    ckpt = Path(meta["path"])
    run_dir = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    report = Path(report_dir) if report_dir else \
        run_dir / f"eval_{name}_beam{k}{'_int8' if int8 else ''}"
    write_report(report, scores, [t.text for t in out])
    if attention_plots:
        _attention_plots(out, tok, report, attention_plots)
    return scores, report


def _attention_plots(out: list[Translation], tok, report: Path, n: int) -> None:
    from nmt.report import plot_attention

    made = 0
    for i, t in enumerate(out):
        if made >= n:
            break
        if t.hyp is None or t.hyp.attn is None:
            continue
        tgt = tok.tgt_pieces(t.hyp.tokens) + ["</s>"]
        plot_attention(t.src_pieces, tgt, t.hyp.attn.float().cpu().numpy(),
                       report / f"attention_{i + 1}.png", title=f"sentence {i + 1}")
        made += 1
    if made == 0:
        log.warning("--attention-plots: this model reports no attention (seq2seq has none)")



def _format(t: Translation, index: int, nbest: int) -> list[str]:
    if nbest == 1:
        return [t.text]
    return [f"{index} ||| {h} ||| {s:.4f}" for h, s in zip(t.nbest, t.scores)]


def _interactive(model: NMTModel, tok, cfg: Config, k: int, nbest: int, device) -> None:
    """One sentence per line from a terminal: a prompt, line editing and history (readline)."""
    try:
        import readline  # noqa: F401  (importing it gives input() line editing)
    except ImportError:  # not on every platform (Windows): plain input() still works
        pass
    print("nmt: interactive mode, one sentence per line, Ctrl-D to end", file=sys.stderr)
    prompt = "> " if sys.stdout.isatty() else ""
    i = 0
    while True:
        try:
            line = input(prompt)
        except EOFError:
            if prompt:
                print()
            return
        warn_unknown(tok, [line], "stdin", verbose=True, first_line=i + 1)
        with decoding_autocast(cfg, device):
            (t,) = translate_texts(model, tok, [line], cfg.decode, beam=k, nbest=nbest,
                                   device=device, where="stdin")
        print("\n".join(_format(t, i, nbest)), flush=True)
        i += 1


def translate(target: str, input_path: Optional[str], output_path: Optional[str],
              beam: Optional[int], nbest: int, device: Optional[str] = None,
              overrides: Optional[dict] = None, int8: bool = False,
              verbose: bool = False) -> int:
    """`nmt translate`: a file or stdin in, one line per input line out (stdout or a file)."""
    setup_logging()
    cfg, model, tok, meta = _load_for_decoding(target, device, overrides, int8)
    device = meta["device"]
    k = cfg.decode.beam if beam is None else beam
    if nbest > k:
        raise NmtError(f"--nbest {nbest} needs a beam of at least {nbest} (beam is {k})")
    if input_path is None and sys.stdin.isatty():
        _interactive(model, tok, cfg, k, nbest, device)
        return 0
    lines = (read_lines(input_path) if input_path
             else split_lines(sys.stdin.buffer.read(), "stdin"))
    warn_unknown(tok, lines, input_path or "stdin", verbose)
    with decoding_autocast(cfg, device):
        out = translate_texts(model, tok, lines, cfg.decode, beam=k, nbest=nbest,
                              device=device, progress=input_path is not None and sys.stderr.isatty(),
                              where=input_path or "stdin")
    text = "".join(line + "\n" for i, t in enumerate(out) for line in _format(t, i, nbest))
    if output_path:
        atomic_write(output_path, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
