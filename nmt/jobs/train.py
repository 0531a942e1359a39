"""`nmt train`: a config becomes a trained run (or continues one), and `--dry-run`'s report.

Everything that can fail on user input runs before anything is written.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from nmt.checkpoint import average_checkpoints, load_checkpoint, tokenizer_from_payload
from nmt.config import Config
from nmt.config.load import check_trainable, with_absolute_paths
from nmt.data.batching import BucketBatcher
from nmt.data.directions import direction_tokenizer, load_directions
from nmt.data.prepared import PreparedCorpus, prepared_corpus
from nmt.data.temperature import warn_unsampled
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.logs import setup_logging
from nmt.models import NMTModel, build_model
from nmt.precision import autocast_for, decode_precision, resolve_precision
from nmt.run_dir import RunDir
from nmt.scoring.metrics import validation_row
from nmt.text_translation import translate_texts
from nmt.training.distributed import barrier, cleanup, init
from nmt.training.finetune import init_optimizer, init_weights, load_parent
from nmt.training.trainer import Trainer, cpu_has_bf16, resolve_device, seed_everything

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


def _resume_checkpoint(cfg: Config) -> Path:
    """The checkpoint --resume continues from, after checking the config still fits the run."""
    run = RunDir(cfg.train.run_dir)
    try:
        ckpt = run.checkpoint(prefer="latest")
    except NmtError:
        raise NmtError(f"--resume: run directory {run.path} has no checkpoint to resume") from None
    old = run.saved_config()
    if old is not None:
        # a path written relative or absolute is the same file
        was, now = with_absolute_paths(old), with_absolute_paths(cfg)
        for section in COMPARED_SECTIONS:
            if getattr(was, section) != getattr(now, section):
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


# Validation pairs of each direction: name -> (sources, references); one entry for one direction.
Valid = dict[str, tuple[list[str], list[str]]]


def _valid_batches(cfg: Config, tok: Tokenizer, valid: Valid) -> list:
    """The validation loss's batches: every direction's pairs, tagged as in training."""
    s: list[list[int]] = []
    t: list[list[int]] = []
    for name, (src, tgt) in valid.items():
        view = direction_tokenizer(cfg.data, tok, name)
        s += view.encode_src(src)
        t += view.encode_tgt(tgt)
    b = BucketBatcher.from_lists(
        s, t, cfg.data.batch_tokens, cfg.data.batch_size, seed=0, prefetch=0
    )
    return [b.batch(ix) for ix in b.epoch(0)]


def _greedy_scorer(
    cfg: Config, tok: Tokenizer, valid: Valid, device: torch.device
) -> Callable[[NMTModel], dict]:
    """The metric table's validation metrics (BLEU, chrF): greedy, exactly what `nmt evaluate
    --beam 1` computes. With directions, each direction's (bleu_de-en, chrf_de-en, ...) and their
    means (bleu, chrf: what best.pt, early stopping and the plateau schedule follow)."""
    forced = bool(cfg.data.directions) and cfg.data.tag == "target"

    def score(model: NMTModel) -> dict:
        outputs = {}
        # the precision `nmt evaluate` decodes in, so validation BLEU is evaluate's
        with autocast_for(decode_precision(cfg.train.precision, device), device):
            for name, (src, ref) in valid.items():
                view = direction_tokenizer(cfg.data, tok, name)
                # a blank prefix through the view is the tag alone: the decoder's forced start
                prefixes = [""] * len(src) if forced else None
                out = translate_texts(
                    model, view, src, cfg.decode, beam=1, nbest=1, device=device, prefixes=prefixes
                )
                outputs[name] = ([t.text for t in out], ref)
        return validation_row(outputs, per_direction=bool(cfg.data.directions))

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
        *filter(None, [batcher.shape_line()]),
    ]
    for role in cfg.data.splits:
        if role != "train":
            for name, (src, _) in load_directions(cfg.data, role).items():
                which = f" {name}" if cfg.data.directions else ""
                lines.append(
                    f"{role} ({cfg.data.splits[role]}){which}: {len(src)} pairs, unfiltered"
                )
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
        return _train(cfg, dist, overwrite, resume, log_tag, progress_bar)
    finally:
        # A DDP model (and its gloo/NCCL work) still alive when the process group is destroyed
        # can abort the process as it exits ("terminate called without an active exception"):
        # _train's frame is gone here, and the trainer's reference cycles are collected now.
        if dist.world > 1:
            gc.collect()
        cleanup()


def _train(
    cfg: Config, dist, overwrite: bool, resume: bool, log_tag: str, progress_bar: bool
) -> TrainResult:
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
        load_directions(cfg.data, "valid")
        if "valid" in cfg.data.splits and dist.rank == 0
        else None
    )
    model = build_model(cfg.model, corpus.tokenizer.src_vocab_size, corpus.tokenizer.tgt_vocab_size)
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
    if dist.rank == 0:  # an average of an earlier stop must not stand for the continued run
        run.averaged.unlink(missing_ok=True)
    trainer.train()
    if cfg.train.average_last and dist.rank == 0 and not trainer.interrupted:
        steps = run.step_checkpoints()[-cfg.train.average_last :]
        average_checkpoints(steps, run.averaged)
        log.info(f"averaged the last {len(steps)} checkpoint(s) into {run.averaged}")
    barrier()  # an interrupted run exits non-zero: no rank may leave before rank 0 saved
    return TrainResult(run.path, trainer.stop_reason or "", trainer.interrupted)


def _trainer(
    cfg: Config,
    corpus: PreparedCorpus,
    valid: Optional[Valid],
    model: NMTModel,
    run: RunDir,
    dist,
    parent,
) -> Trainer:
    """The trainer of a run, its starting weights (a fine-tuned run's parent) in place."""
    tok = corpus.tokenizer
    log.info(corpus.stats.line())
    if corpus.directions:
        log.info(corpus.direction_line())
        warn_unsampled(corpus.directions, cfg.data.temperature)
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
    shapes = batcher.shape_line()
    if shapes:
        log.info(shapes)
    score_fn, valid_batches = None, []
    if valid is not None and dist.rank == 0:
        valid_batches = _valid_batches(cfg, tok, valid)
        n = cfg.train.valid_max_sentences  # per direction
        firsts = {k: (s[:n], r[:n]) if n else (s, r) for k, (s, r) in valid.items()}
        score_fn = _greedy_scorer(cfg, tok, firsts, dist.device)
    trainer = Trainer(cfg, model, tok, batcher, valid_batches, run.path, dist, score_fn)
    if parent and cfg.train.init_optimizer:
        init_optimizer(trainer, parent)
    return trainer
