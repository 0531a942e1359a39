"""Save and resume a training run: model, optimiser, schedule, loss scaler, progress and every
rank's generator states, so a resumed run continues bit-for-bit like an uninterrupted one."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from nmt.checkpoint import load_checkpoint, model_payload, save_checkpoint, tokenizer_payload
from nmt.config import Config
from nmt.config.load import to_dict
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.run_dir import RunDir
from nmt.training.distributed import DistInfo, all_gather_objects
from nmt.training.rng import rank_seed, rng_state, seed_everything, set_rng_state
from nmt.training.step import Optimised

log = logging.getLogger("nmt")


@dataclass
class Progress:
    """What a checkpoint needs to continue exactly where training stopped."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: Optional[float] = None
    bad_validations: int = 0
    bad_steps_total: int = 0
    scaler_skipped: int = 0  # fp16 steps the GradScaler dropped (an overflow; not a divergence)
    train_seconds: float = 0.0  # training time summed over every run of a resumed training
    history: list = field(default_factory=list)


class TrainCheckpoints:
    """The run's step and best checkpoints, written by rank 0 and read back on resume.

    A checkpoint saved on a signal is a bookmark: it is where a resumed run starts, and it is
    deleted by the resumed run's next save, so the kept and averaged step checkpoints
    (train.keep_last, train.average_last) are those of a run that was never interrupted."""

    def __init__(self, run: RunDir, cfg: Config, tokenizer: Tokenizer, dist: DistInfo) -> None:
        self.run, self.cfg, self.tokenizer, self.dist = run, cfg, tokenizer, dist
        self.resumed_bookmark: Optional[Path] = None

    def payload(self, parts: Optimised, progress: Progress, rngs: Optional[list] = None) -> dict:
        rngs = rngs or [rng_state(self.dist.device)]
        return {
            "config": to_dict(self.cfg),
            "model": model_payload(parts.net),
            "optimizer": parts.opt.state_dict(),
            "schedule": parts.sched.state_dict(),
            "scaler": parts.scaler.state_dict(),
            "progress": vars(progress).copy(),
            "step": progress.step,
            "rng": rngs[0],
            "rng_ranks": rngs,
            "tokenizer": tokenizer_payload(self.tokenizer),
            "params": parts.model.num_parameters(),
        }

    def gather_rngs(self) -> list:
        """Every rank's generator states (a collective: all ranks call it)."""
        return all_gather_objects(rng_state(self.dist.device), self.dist.world)

    def save(
        self, parts: Optimised, progress: Progress, best: bool, rngs: list, bookmark: bool = False
    ) -> None:
        """Write step checkpoint (and best.pt) on rank 0; prune old step checkpoints. A
        `bookmark` (saved on a signal) prunes nothing, and is not written over a checkpoint of
        the same step: that one already holds this state."""
        if self.dist.rank != 0:
            return
        path = self.run.step_checkpoint(progress.step)
        if bookmark and path.exists():
            return
        self.run.checkpoints.mkdir(exist_ok=True)
        payload = {**self.payload(parts, progress, rngs), "bookmark": bookmark}
        save_checkpoint(path, payload)
        if best:  # never a bookmark: a signal's save skips validation
            save_checkpoint(self.run.best, payload)
        if self.resumed_bookmark not in (None, path):  # superseded by this later checkpoint
            self.resumed_bookmark.unlink(missing_ok=True)  # type: ignore[union-attr]
        self.resumed_bookmark = None
        if not bookmark:
            self.run.prune(self.cfg.train.keep_last)

    def resume(self, path: Path, parts: Optimised) -> Progress:
        """Load `path` into `parts` and this rank's generators; the progress to continue from."""
        ck = load_checkpoint(path)
        try:
            parts.model.load_state_dict(ck["model"])
        except RuntimeError:
            raise NmtError(
                f"checkpoint {path} does not fit this model (architecture or vocabulary changed?)"
            ) from None
        parts.opt.load_state_dict(ck["optimizer"])
        parts.sched.load_state_dict(ck["schedule"])
        parts.scaler.load_state_dict(ck["scaler"])
        p = Progress(**ck["progress"])
        self.resumed_bookmark = path if ck.get("bookmark") else None
        rank, rngs = self.dist.rank, ck.get("rng_ranks") or [ck["rng"]]
        if rank < len(rngs):
            set_rng_state(rngs[rank], self.dist.device)
        else:  # more ranks than the run had: a fresh stream for this rank, moved on by the step
            seed_everything(rank_seed(self.cfg.train.seed, rank) + p.step)
            log.warning(
                f"rank {rank}: the checkpoint holds generator states for "
                f"{len(rngs)} rank(s); this rank starts a new one"
            )
        log.info(
            f"resumed from {path} at step {p.step} (epoch {p.epoch + 1}, batch {p.batch_in_epoch})"
        )
        return p
