"""The top of the chain: a config becomes a trained run, a checkpoint becomes a report.

`cli` and `study` call these; nothing below imports this module.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from tqdm import tqdm

from nmt.bootstrap import DEFAULT_SAMPLES
from nmt.checkpoint import average_checkpoints, load_checkpoint, load_models, tokenizer_from_payload
from nmt.config import Config
from nmt.config.load import check_trainable, with_decode_options
from nmt.data.batching import BucketBatcher
from nmt.data.corpus import load_split, read_lines
from nmt.data.prepared import PreparedCorpus, prepared_corpus
from nmt.data.tokenizer import Tokenizer
from nmt.distributed import barrier, cleanup, init
from nmt.errors import NmtError
from nmt.evaluate import (
    DEFAULT_METRICS,
    MeanScore,
    bucket_bounds,
    data_fingerprint,
    make_metric,
    score_report,
)
from nmt.files import atomic_write
from nmt.finetune import init_optimizer, init_weights, load_parent
from nmt.models import NMTModel, build_model
from nmt.models.onednn import for_cpu_decoding
from nmt.models.quantize import check_int8_device, quantize_int8
from nmt.precision import decode_precision, resolve_precision
from nmt.run_dir import RunDir
from nmt.train import Trainer, autocast_for, cpu_has_bf16, resolve_device, seed_everything
from nmt.translate import Translation, score_pairs, score_texts, translate_texts
from nmt.unknown_words import warn_unknown

log = logging.getLogger("nmt")
COMPARED_SECTIONS = ("data", "vocab", "model")
# Changing these would make a resumed run differ from the one it continues (batch order, optimiser
# state, gradient scaler, the best score so far), so --resume refuses them; limits, logging,
# validation frequency and lr may change.
FIXED_TRAIN_KEYS = (
    "seed",
    "optimizer",
    "precision",
    "accum_steps",
    "schedule",
    "early_stop_metric",
)


class _AboveProgressBar(logging.StreamHandler):
    """Writes each record on its own line: tqdm.write clears a progress bar drawn on the same
    stream, prints the record and redraws the bar below it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(run: Optional[RunDir] = None, rank: int = 0, tag: str = "") -> None:
    """Log lines to stderr (above a progress bar) and, on rank 0 of a run, to RUN/train.log;
    `tag` marks each line (`nmt study` names the model when models train side by side)."""
    root = logging.getLogger("nmt")
    root.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    for h in list(root.handlers):
        if getattr(h, "_nmt", False):
            root.removeHandler(h)
            h.close()
    tag = f"[{tag}] " if tag else ""
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {tag}%(message)s", "%H:%M:%S")
    handlers: list[logging.Handler] = [_AboveProgressBar(sys.stderr)]
    if run is not None and rank == 0:
        handlers.append(logging.FileHandler(run.log, encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        h._nmt = True  # type: ignore[attr-defined]
        root.addHandler(h)
    root.propagate = False


def _resume_checkpoint(cfg: Config) -> Path:
    """The checkpoint --resume continues from, after checking the config still fits the run."""
    run = RunDir(cfg.train.run_dir)
    try:
        ckpt = run.checkpoint(prefer="latest")
    except NmtError:
        raise NmtError(f"--resume: run directory {run.path} has no checkpoint to resume") from None
    old = run.saved_config()
    if old is not None:
        for section in COMPARED_SECTIONS:
            if getattr(old, section) != getattr(cfg, section):
                raise NmtError(
                    f"--resume: '{section}' in the config differs from the run in "
                    f"{run.path} (data, vocab and model must stay as they were)"
                )
        for key in FIXED_TRAIN_KEYS:
            was, now = getattr(old.train, key), getattr(cfg.train, key)
            if key == "precision" and "auto" in (was, now):
                # auto and what it means on this machine are the same run
                dev = resolve_device(cfg.train)
                was, now = resolve_precision(was, dev), resolve_precision(now, dev)
            if was != now:
                raise NmtError(
                    f"--resume: 'train.{key}' is {now!r} but the run in {run.path} used "
                    f"{was!r}; it cannot change when resuming"
                )
    return ckpt


def _check_run_dir(cfg: Config, overwrite: bool) -> None:
    """Refuse to start over a different run unless --overwrite (nothing is written here)."""
    run = RunDir(cfg.train.run_dir)
    if overwrite or run.is_empty():
        return
    if not run.same_config(cfg) or run.holds_run():
        raise NmtError(
            f"run directory {run.path} already holds a run; pass --resume to continue "
            f"it or --overwrite to replace it"
        )


def describe_precision(cfg: Config, device: torch.device) -> str:
    p = resolve_precision(cfg.train.precision, device)
    if cfg.train.precision == "auto":
        return f"auto: {p} on {device.type}" + ("" if p == "fp32" else " (autocast)")
    if p == "fp32":
        return f"fp32 on {device.type}"
    note = ""
    if p == "bf16" and device.type == "cpu" and not cpu_has_bf16():
        note = " (this CPU has no native bf16: expect it to be slow)"
    return f"{p} autocast on {device.type}{note}" + (" with GradScaler" if p == "fp16" else "")


def _valid_batches(cfg: Config, tok, src: list[str], tgt: list[str]) -> list:
    s, t = tok.encode_src(src), tok.encode_tgt(tgt)
    b = BucketBatcher.from_lists(
        s, t, cfg.data.batch_tokens, cfg.data.batch_size, seed=0, prefetch=0
    )
    return [b.batch(ix) for ix in b.epoch(0)]


def _greedy_scorer(
    cfg: Config, tok, src: list[str], ref: list[str], device: torch.device
) -> Callable[[NMTModel], dict]:
    """Validation BLEU and chrF: greedy, exactly what `nmt evaluate --beam 1` computes."""

    def score(model: NMTModel) -> dict:
        with decoding_autocast(cfg, device):
            _, sc = score_texts(
                model, tok, src, ref, cfg.decode, beam=1, bounds=cfg.eval.buckets, device=device
            )
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
    return (
        f"batches per epoch: {len(batches)}, mean {lt.sum() / len(batches):.0f} target "
        f"tokens and {sizes.mean():.1f} sentences per batch, padding "
        f"{100 * (1 - real / slots):.1f}%"
    )


def data_report(cfg: Config, progress: bool = False, where: str = "the config") -> str:
    """Corpus and batch statistics without training (`nmt train --dry-run`)."""
    check_trainable(cfg, where)  # what training would refuse, --dry-run refuses too
    corpus = prepared_corpus(cfg, progress)
    tok = corpus.tokenizer
    batcher = corpus.batcher(cfg.data, cfg.train.seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    lines = [
        corpus.summary(),
        f"subwords: {cfg.vocab.type}, {'joint' if tok.joint else 'separate'} vocabulary, "
        f"source {tok.src_vocab_size} / target {tok.tgt_vocab_size} pieces",
        f"train tokens (kept pairs): source {int(batcher.src_len.sum())}, target "
        f"{int(batcher.tgt_len.sum()) + len(batcher)} (with EOS)",
        _batch_stats(batcher),
    ]
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
        corpus.tokenizer.src_proto,
        corpus.tokenizer.tgt_proto,
    ):
        raise NmtError(
            f"--resume: the prepared corpus {corpus.path} was encoded with other "
            f"subword models than the run's checkpoint; delete it to re-prepare"
        )
    return corpus


@dataclass
class TrainResult:
    run: Path
    stop_reason: str
    interrupted: bool  # stopped by SIGINT/SIGTERM: checkpointed, but not finished


def train(
    cfg: Config,
    overwrite: bool = False,
    resume: bool = False,
    log_tag: str = "",
    where: str = "the config",
    progress_bar: bool = False,
) -> TrainResult:
    """Train a model from a config (or continue it with resume); `log_tag` marks its log lines,
    `where` names the config in errors; `progress_bar` draws tqdm's bar (the CLI's choice: only
    on a terminal, and only with `train.progress`)."""
    check_trainable(cfg, where)
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
        setup_logging(None, dist.rank, log_tag)
        seed_everything(cfg.train.seed)
        tok = tokenizer_from_payload(load_checkpoint(ckpt_path)["tokenizer"]) if ckpt_path else None
        parent = load_parent(cfg) if cfg.train.init_from and not resume else None
        tok = parent.tokenizer if parent else tok
        # A fine-tuned run is encoded with its parent's subwords (on resume, its checkpoint's:
        # the same ones), never with new ones trained on the new data.
        corpus = _training_corpus(cfg, dist.rank, tok, tok if cfg.train.init_from else None)
        # Only rank 0 validates: the other ranks neither read the split nor import `datasets`.
        valid = (
            load_split(cfg.data, "valid") if "valid" in cfg.data.splits and dist.rank == 0 else None
        )
        model = build_model(
            cfg.model, corpus.tokenizer.src_vocab_size, corpus.tokenizer.tgt_vocab_size
        )
        run = RunDir(cfg.train.run_dir)
        if dist.rank == 0:
            run.create(cfg, overwrite=overwrite and not resume)
            corpus.tokenizer.save(run.path)
        barrier()
        setup_logging(run, dist.rank, log_tag)
        trainer = _trainer(cfg, corpus, valid, model, run, dist, parent)
        trainer.progress_bar = progress_bar
        if ckpt_path is not None:
            trainer.resume(ckpt_path)
        trainer.train()
        if cfg.train.average_last and dist.rank == 0 and not trainer.interrupted:
            steps = run.step_checkpoints()[-cfg.train.average_last :]
            average_checkpoints(steps, run.averaged)
            log.info(f"averaged the last {len(steps)} checkpoint(s) into {run.averaged}")
        barrier()  # an interrupted run exits non-zero: no rank may leave before rank 0 saved
        return TrainResult(run.path, trainer.stop_reason or "", trainer.interrupted)
    finally:
        cleanup()


def _trainer(
    cfg: Config,
    corpus: PreparedCorpus,
    valid: Optional[tuple[list[str], list[str]]],
    model: NMTModel,
    run: RunDir,
    dist,
    parent,
) -> Trainer:
    """The trainer of a run, its starting weights (a fine-tuned run's parent) in place."""
    tok = corpus.tokenizer
    log.info(corpus.stats.line())
    log.info(f"training corpus: {corpus.path} (memory-mapped)")
    if parent:
        init_weights(model, parent)
    log.info(f"model {cfg.model.arch}: {model.num_parameters():,} trainable parameters")
    log.info(
        f"precision: {describe_precision(cfg, dist.device)}; device {dist.device}; "
        f"{torch.get_num_threads()} threads; {dist.world} process(es)"
    )
    batcher = corpus.batcher(
        cfg.data, cfg.train.seed, dist.rank, dist.world, pin=dist.device.type == "cuda"
    )
    score_fn, valid_batches = None, []
    if valid is not None and dist.rank == 0:
        valid_batches = _valid_batches(cfg, tok, *valid)
        n = cfg.train.valid_max_sentences or len(valid[0])
        score_fn = _greedy_scorer(cfg, tok, valid[0][:n], valid[1][:n], dist.device)
    trainer = Trainer(cfg, model, tok, batcher, valid_batches, run.path, dist, score_fn)
    if parent and cfg.train.init_optimizer:
        init_optimizer(trainer, parent)
    return trainer


def decoding_device(device: Optional[str], cfg: Config) -> torch.device:
    """`--device` if given (checked), else the device the run trained on where this machine has
    it (a run trained on CUDA decodes on the CPU of a machine without a GPU)."""
    if device is None:
        return torch.device(
            "cuda" if cfg.train.device != "cpu" and torch.cuda.is_available() else "cpu"
        )
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


def decoding_autocast(cfg: Config, device: torch.device, int8: bool = False):
    """Decoding's autocast: fp32 on a CPU and for int8 models, the run's precision on a GPU
    (see `nmt.precision.decode_precision`)."""
    return autocast_for(decode_precision(cfg.train.precision, device, int8), device)


def _load_for_decoding(
    target: str | list[str], device: Optional[str], overrides: Optional[dict], int8: bool = False
):
    """A checkpoint's (or, for several, an ensemble's) config, model, tokenizer and meta, with
    command-line decode settings checked as the config's; meta["device"] is the model's device."""
    if int8:
        device = device or "cpu"  # int8 decodes on the CPU whatever the run trained on
        check_int8_device(device)  # before loading anything
    cfg, model, tok, meta = load_models([target] if isinstance(target, str) else target, "cpu")
    meta["device"], meta["int8"] = decoding_device(device, cfg), int8
    if int8:
        model = quantize_int8(model)
    else:
        precision = decode_precision(cfg.train.precision, meta["device"])
        model = for_cpu_decoding(model, meta["device"], precision)
    model.to(meta["device"])
    return with_decode_options(cfg, overrides or {}), model, tok, meta


@dataclass
class EvalOptions:
    """What `nmt evaluate` decodes and how it scores and reports (the command's options)."""

    split: Optional[str] = None  # a split role of the config (default: eval.split)
    src_file: Optional[str] = None  # or these two files
    ref_file: Optional[str] = None
    beam: Optional[int] = None
    report_dir: Optional[str] = None  # default RUN/eval_SPLIT_beamK
    buckets: Optional[list[int]] = None
    attention_plots: int = 0
    attn_layer: int = -1
    attn_head: Optional[int] = None
    device: Optional[str] = None
    progress: bool = True
    overrides: Optional[dict] = None  # decode.* settings from the command line
    int8: bool = False
    metrics: tuple[str, ...] = DEFAULT_METRICS
    bootstrap: int = DEFAULT_SAMPLES  # resamples for 95% intervals (0: none)
    comet_model: Optional[str] = None  # a local COMET checkpoint (needs unbabel-comet)
    verbose: bool = False


def evaluate(target: str | list[str], o: Optional[EvalOptions] = None) -> tuple[dict, Path]:
    """Decode a split (or --src/--ref files) with a checkpoint (several: an ensemble); write
    hyps, scores with bootstrap intervals, and plots into the report directory."""
    from nmt.report import write_report  # matplotlib: imported only when a report is written

    o = o or EvalOptions()
    cfg, model, tok, meta = _load_for_decoding(target, o.device, o.overrides, o.int8)
    srcs, refs, name, test_set = _eval_set(cfg, o.split, o.src_file, o.ref_file)
    warn_unknown(tok, srcs, o.src_file or f"split {name}", o.verbose)
    bounds = o.buckets or cfg.eval.buckets
    _check_eval_options(bounds, o.metrics, o.comet_model)  # before decoding the whole split
    model.set_attention_view(o.attn_layer, o.attn_head)
    k = cfg.decode.beam if o.beam is None else o.beam
    what = test_set["split"] or f"{o.src_file} / {o.ref_file}"
    log.info(
        f"evaluating {meta['path']} (step {meta['step']}) on {what}: {len(srcs)} "
        f"sentences, beam {k}"
    )
    with decoding_autocast(cfg, meta["device"], meta["int8"]):
        out = translate_texts(
            model,
            tok,
            srcs,
            cfg.decode,
            beam=k,
            nbest=1,
            device=meta["device"],
            progress=o.progress,
            return_attn=o.attention_plots > 0,
        )
    hyps = [t.text for t in out]
    scores = _scores(srcs, hyps, refs, bounds, o, meta["device"])
    scores.update(
        {
            "beam": k,
            "checkpoint": meta["path"],
            "step": meta["step"],
            "split": test_set["split"],
            "test_set": test_set,
        }
    )
    report, model_name = _report_place(cfg, meta, name, k, o.int8, o.report_dir)
    write_report(
        report,
        scores,
        hyps,
        srcs=srcs,
        refs=refs,
        name=model_name,
        title=f"BLEU by source length: {what}, {len(srcs)} sentences",
    )
    if o.attention_plots:
        view = _attention_view(cfg, model, o.attn_layer, o.attn_head)
        _attention_plots(out, srcs, tok, report, o.attention_plots, f"{model_name}, {view}")
    return scores, report


def _scores(
    srcs: list[str],
    hyps: list[str],
    refs: list[str],
    bounds: list[int],
    o: EvalOptions,
    device: torch.device,
) -> dict:
    """The scores report, with COMET from a local checkpoint when one is given."""
    extra, comet_model = None, o.comet_model
    if comet_model:
        from nmt.comet import comet_scores

        gpus = int(str(device).startswith("cuda"))
        extra = {
            "comet": (
                MeanScore(f"comet:{comet_model}"),
                comet_scores(comet_model, srcs, hyps, refs, gpus=gpus),
            )
        }
    return score_report(srcs, hyps, refs, bounds, o.metrics, n_samples=o.bootstrap, extra=extra)


def _report_place(
    cfg: Config, meta: dict, name: str, k: int, int8: bool, report_dir: Optional[str]
) -> tuple[Path, str]:
    """The report directory (given, or RUN/eval_NAME_beamK...) and the model's name in it."""
    run = RunDir.of_checkpoint(meta["path"])
    members = f"_ensemble{len(meta['ensemble'])}" if "ensemble" in meta else ""
    suffix = f"{members}{'_int8' if int8 else ''}"
    report = Path(report_dir) if report_dir else run.report(name, k, suffix)
    ensemble = f", ensemble of {len(meta['ensemble'])}" if "ensemble" in meta else ""
    return report, (
        f"{run.path.name} ({cfg.model.arch}{ensemble}, step {meta['step']}, "
        f"beam {k}{', int8' if int8 else ''})"
    )


def _eval_set(
    cfg: Config, split: Optional[str], src_file: Optional[str], ref_file: Optional[str]
) -> tuple[list[str], list[str], str, dict]:
    """Sources, references, the report's name for them and the scores' `test_set` record."""
    if src_file or ref_file:
        if not (src_file and ref_file):
            raise NmtError("--src and --ref must be given together")
        srcs, refs = read_lines(src_file), read_lines(ref_file)
        if len(srcs) != len(refs):
            raise NmtError(
                f"line counts differ: {src_file} has {len(srcs)} lines, {ref_file} has {len(refs)}"
            )
        name = f"file_{Path(src_file).stem}"  # never the directory of a split's report
        test_set = {
            "split": None,
            "src_file": str(Path(src_file).resolve()),
            "ref_file": str(Path(ref_file).resolve()),
        }
    else:
        name = split or cfg.eval.split
        srcs, refs = load_split(cfg.data, name)
        test_set = {"split": name, "data": _data_name(cfg)}
    if not srcs:
        raise NmtError(f"nothing to evaluate: {test_set['split'] or src_file} is empty")
    test_set.update(
        {
            "n": len(srcs),
            "src_words": sum(len(s.split()) for s in srcs),
            "ref_words": sum(len(r.split()) for r in refs),
            "sha256": data_fingerprint(srcs, refs),
        }
    )
    return srcs, refs, name, test_set


def _check_eval_options(
    bounds: list[int], metrics: tuple[str, ...], comet_model: Optional[str]
) -> None:
    bucket_bounds(bounds)  # a bad --buckets fails now, not after decoding the whole split
    for m in metrics:
        make_metric(m)  # so does a bad --metrics
    if comet_model and not Path(comet_model).is_file():
        raise NmtError(f"--comet-model {comet_model}: no such file (a local COMET checkpoint)")


def _data_name(cfg: Config) -> str:
    """Where a split comes from, for the report: the hub dataset or the local directory."""
    d = cfg.data
    if d.source == "hub":
        return f"hub:{d.hub_name}" + (f"/{d.hub_config}" if d.hub_config else "")
    if d.source == "local":
        return f"local:{Path(d.path).resolve() if d.path else '?'}"
    return f"synthetic:seed={d.synthetic.seed}"


def _attention_view(cfg: Config, model: NMTModel, layer: int, head: Optional[int]) -> str:
    layers, heads = model.attention_shape()
    if layers == 1 and heads == 1:
        return "attention"
    shown = layer % layers + 1
    return f"cross-attention layer {shown}/{layers}, " + (
        "mean of heads" if head is None else f"head {head + 1}/{heads}"
    )


def _attention_plots(
    out: list[Translation], srcs: list[str], tok, report: Path, n: int, what: str
) -> None:
    """Heatmaps of the first n sentences, labelled with what the reader typed: each source
    piece's own input text (an unknown word keeps its spelling), target pieces without the
    word-boundary marker."""
    from nmt.pieces import display, surfaces
    from nmt.report import plot_attention

    made = 0
    for i, t in enumerate(out):
        if made >= n:
            break
        if t.hyp is None or t.hyp.attn is None:
            continue
        text = srcs[i].lower() if tok.lowercase else srcs[i]
        pieces = t.src_pieces[:-1]  # the model's pieces (maybe truncated), then </s>
        surf = surfaces(tok.src, text)[: len(pieces)]
        surf = surf if len(surf) == len(pieces) else [""] * len(pieces)
        src = [s or display(p) or "\u00b7" for s, p in zip(surf, pieces)] + ["</s>"]
        tgt = [display(p) or "\u00b7" for p in tok.tgt_pieces(t.hyp.tokens)] + ["</s>"]
        plot_attention(
            src,
            tgt,
            t.hyp.attn.float().cpu().numpy(),
            report / f"attention_{i + 1}.png",
            title=f"{what}\nsentence {i + 1}: {len(srcs[i].split())} words",
        )
        made += 1
    if made == 0:
        log.warning("--attention-plots: this model reports no attention (seq2seq has none)")


@dataclass
class Session:
    """A loaded model (or ensemble) with its decoding settings, ready to translate lines."""

    cfg: Config
    model: NMTModel
    tok: Tokenizer
    meta: dict  # path, step, device (and the members of an ensemble)
    beam: int
    nbest: int

    def translate(
        self,
        lines: list[str],
        where: str,
        progress: bool = False,
        prefixes: Optional[list[str]] = None,
        return_attn: bool = False,
    ) -> list[Translation]:
        with decoding_autocast(self.cfg, self.meta["device"], self.meta["int8"]):
            return translate_texts(
                self.model,
                self.tok,
                lines,
                self.cfg.decode,
                beam=self.beam,
                nbest=self.nbest,
                device=self.meta["device"],
                progress=progress,
                where=where,
                prefixes=prefixes,
                return_attn=return_attn,
            )

    def output_lines(self, t: Translation, index: int) -> list[str]:
        """The text, or with nbest > 1 the lines `INDEX ||| HYPOTHESIS ||| SCORE`."""
        if self.nbest == 1:
            return [t.text]
        return [f"{index} ||| {h} ||| {s:.4f}" for h, s in zip(t.nbest, t.scores)]


def open_session(
    target: str | list[str],
    beam: Optional[int],
    nbest: int,
    device: Optional[str] = None,
    overrides: Optional[dict] = None,
    int8: bool = False,
) -> Session:
    """Load checkpoint(s) for `nmt translate`, with command-line decode settings checked."""
    cfg, model, tok, meta = _load_for_decoding(target, device, overrides, int8)
    k = cfg.decode.beam if beam is None else beam
    if nbest > k and not cfg.decode.sample:
        raise NmtError(f"--nbest {nbest} needs a beam of at least {nbest} (beam is {k})")
    return Session(cfg, model, tok, meta, k, nbest)


def translate(
    session: Session,
    lines: list[str],
    where: str,
    output_path: Optional[str],
    prefix_path: Optional[str] = None,
    alignment: bool = False,
    verbose: bool = False,
    progress: bool = False,
) -> int:
    """`nmt translate` of given lines (read by the CLI from `where`): one output line per input
    line, to `output_path` or stdout."""
    warn_unknown(session.tok, lines, where, verbose)
    prefixes = read_lines(prefix_path) if prefix_path else None
    if prefixes is not None and len(prefixes) != len(lines):
        raise NmtError(
            f"--prefix {prefix_path} has {len(prefixes)} lines but the input has "
            f"{len(lines)}; expected one prefix line per input line"
        )
    out = session.translate(lines, where, progress, prefixes, return_attn=alignment)
    text = "".join(line + "\n" for i, t in enumerate(out) for line in session.output_lines(t, i))
    if alignment:
        _write_alignments(out, lines, session.tok, output_path)
    _emit(text, output_path)
    return 0


def _emit(text: str, output_path: Optional[str]) -> None:
    """The command's output: written atomically to `output_path`, or to stdout."""
    if output_path:
        atomic_write(output_path, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _write_alignments(out: list[Translation], lines: list[str], tok, output_path: str) -> None:
    """FILE.align: Pharaoh `src-tgt` word links per line; FILE.align.json: soft word alignments."""
    import json

    from nmt.alignment import (
        hard_alignment,
        pharaoh,
        word_attention,
        word_index_by_decoding,
        word_index_by_words,
    )
    from nmt.data.tokenizer import UNK

    hard, soft = [], []
    for t, text in zip(out, lines):
        if t.hyp is None:
            hard.append("")
            soft.append({"src": [], "tgt": [], "attention": []})
            continue
        if t.hyp.attn is None:
            raise NmtError("--alignment needs a model with attention (seq2seq has none)")
        src = [tok.src.piece_to_id(p) for p in t.src_pieces[:-1]]
        src_words = text.split()
        src_index = word_index_by_words(src, [ids[:-1] for ids in tok.encode_src(src_words)], UNK)
        if src_index is None:  # e.g. truncated: index the words decoded
            src_index = word_index_by_decoding(src, tok.src.decode)
            src_words = tok.src.decode(src).split()
        a = word_attention(
            t.hyp.attn.float().numpy(),
            src_index,
            word_index_by_decoding(t.hyp.tokens, lambda ids: tok.decode_tgt([ids])[0]),
        )
        if not t.text.split():  # nothing but unknown pieces came out
            a = a[:0]
        hard.append(pharaoh(hard_alignment(a)))
        soft.append(
            {
                "src": src_words,
                "tgt": t.text.split(),
                "attention": [[round(float(x), 4) for x in row] for row in a],
            }
        )
    atomic_write(output_path + ".align", "".join(line + "\n" for line in hard))
    atomic_write(
        output_path + ".align.json", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in soft)
    )


def score(
    target: str | list[str],
    src_file: str,
    ref_file: str,
    output_path: Optional[str],
    device: Optional[str] = None,
    overrides: Optional[dict] = None,
) -> int:
    """`nmt score`: one JSON line per (source, reference) pair with its model log-probs."""
    import json

    srcs, refs = read_lines(src_file), read_lines(ref_file)
    if len(srcs) != len(refs):
        raise NmtError(
            f"line counts differ: {src_file} has {len(srcs)} lines, {ref_file} has {len(refs)}"
        )
    cfg, model, tok, meta = _load_for_decoding(target, device, overrides)
    with decoding_autocast(cfg, meta["device"]):
        rows = score_pairs(model, tok, srcs, refs, cfg.decode, meta["device"], where=src_file)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _emit(text, output_path)
    return 0
