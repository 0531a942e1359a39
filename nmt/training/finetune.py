"""Fine-tuning: a new run that starts from a trained run's weights (`train.init_from`).

The new run reuses the parent's sentencepiece model(s), so its `vocab` section must be the
parent's; its `model` section must build a model the parent's weights load into (same names, same
shapes). The optimiser and schedule start fresh unless `train.init_optimizer` is true. Every
mismatch is found before anything is written.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import torch

from nmt.checkpoint import config_of, load_checkpoint, resolve, tokenizer_from_payload
from nmt.config import Config
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.models import build_model

log = logging.getLogger("nmt")


@dataclasses.dataclass
class Parent:
    path: Path  # the checkpoint file the weights come from
    ckpt: dict
    tokenizer: Tokenizer


def load_parent(cfg: Config) -> Parent:
    """The checkpoint named by train.init_from (a run's best one), checked against the config's
    vocab and model sections before anything is written."""
    path = resolve(cfg.train.init_from)
    ckpt = load_checkpoint(path)
    parent_vocab = config_of(ckpt, str(path)).vocab
    for f in dataclasses.fields(parent_vocab):
        ours, theirs = getattr(cfg.vocab, f.name), getattr(parent_vocab, f.name)
        if ours != theirs:
            raise NmtError(
                f"'vocab.{f.name}' is {ours!r} in this config but {theirs!r} in "
                f"{path} (train.init_from); a fine-tuned run reuses that run's subword "
                f"models, so its vocab section must be the same"
            )
    parent = Parent(path, ckpt, tokenizer_from_payload(ckpt["tokenizer"], str(path)))
    tok = parent.tokenizer
    with torch.random.fork_rng():  # a throwaway model must not shift the run's random stream
        _check_fits(build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size), parent)
    return parent


def _check_fits(model: torch.nn.Module, parent: Parent) -> None:
    """The first parameter name or shape that differs is one error line."""
    ours, theirs = model.state_dict(), parent.ckpt["model"]
    for name, t in ours.items():
        if name not in theirs:
            raise NmtError(
                f"the 'model' section builds parameter {name} {tuple(t.shape)}, which "
                f"{parent.path} (train.init_from) does not have"
            )
        if theirs[name].shape != t.shape:
            raise NmtError(
                f"parameter {name} has shape {tuple(t.shape)} with this 'model' section "
                f"but {tuple(theirs[name].shape)} in {parent.path} (train.init_from)"
            )
    extra = [n for n in theirs if n not in ours]
    if extra:
        raise NmtError(
            f"{parent.path} (train.init_from) has parameter {extra[0]} "
            f"{tuple(theirs[extra[0]].shape)}, which this 'model' section does not build"
        )


def init_weights(model: torch.nn.Module, parent: Parent) -> None:
    """Copy the parent's weights in (load_parent has checked that they fit)."""
    model.load_state_dict(parent.ckpt["model"])
    log.info(f"weights from {parent.path} (step {parent.ckpt.get('step', 0)})")


def init_optimizer(trainer, parent: Parent) -> None:
    """Continue the parent's optimiser moments and schedule state (train.init_optimizer)."""
    trainer.opt.load_state_dict(parent.ckpt["optimizer"])
    trainer.sched.load_state_dict(parent.ckpt["schedule"])
    trainer.scaler.load_state_dict(parent.ckpt["scaler"])
    log.info(f"optimiser and schedule state from {parent.path}")
