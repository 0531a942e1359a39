"""The one loader for decoding: run directories or checkpoints -> a model ready to decode.

`nmt translate`, `evaluate`, `score`, the Python API (`nmt.api.Translator`) and the server all
load through `load_for_decoding`, so they agree on the default device (the run's training device
where this machine has it, else the CPU), on precision (`nmt.precision.decode_precision` unless
asked otherwise), on int8, on ensembles (several checkpoints decode as one model) and on the
error text of each mistake. Each of them makes its call's decode settings (the run's decode.*
with the caller's beam and nbest) once, with `decode_settings`, and hands them down whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch

from nmt.checkpoint import load_models
from nmt.config import Config
from nmt.config.load import with_decode_options
from nmt.data.language_pieces import check_min_count, count_target_pieces
from nmt.data.tokenizer import Tokenizer
from nmt.decode import decode_settings
from nmt.errors import NmtError
from nmt.models.base import NMTModel
from nmt.models.onednn import for_cpu_decoding
from nmt.models.quantize import check_int8_device, quantize_int8
from nmt.precision import DTYPES, decode_precision

PRECISIONS = tuple(DTYPES)
Target = str | Path | Sequence[str | Path]

__all__ = ["Loaded", "decode_settings", "decoding_device", "load_for_decoding", "PRECISIONS"]


@dataclass
class Loaded:
    """A model (or ensemble) on its decoding device, with what decoding it needs."""

    cfg: Config  # the (first member's) config, decode.* options applied
    model: NMTModel
    tok: Tokenizer
    meta: dict  # path and step of the (first) checkpoint; "ensemble": every member's path
    device: torch.device
    precision: str  # fp32, bf16 or fp16: the autocast decoding runs under
    int8: bool

    def autocast(self):
        """Decoding's autocast; fp32 switches off any autocast a caller left on (int8 layers
        take fp32 activations)."""
        if self.precision == "fp32":
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast(self.device.type, dtype=DTYPES[self.precision])


def decoding_device(device: Optional[str | torch.device], cfg: Config) -> torch.device:
    """`device` if given (checked), else the device the run trained on where this machine has
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


def _check_precision(precision: Optional[str], int8: bool) -> None:
    """What can be refused before anything is loaded."""
    if precision is None:
        return
    if precision not in PRECISIONS:
        raise NmtError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if int8 and precision != "fp32":
        raise NmtError(f"int8 decodes in fp32 (its activations), not {precision}")


def _decoding_precision(
    precision: Optional[str], cfg: Config, device: torch.device, int8: bool
) -> str:
    if precision is None:
        return decode_precision(cfg.train.precision, device, int8)
    if precision == "fp16" and device.type != "cuda":
        raise NmtError("precision fp16 needs a CUDA device (use bf16 on CPU)")
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise NmtError("precision bf16 is not supported by this GPU; use fp16 or fp32")
    return precision


def load_for_decoding(
    target: Target,
    device: Optional[str | torch.device] = None,
    precision: Optional[str] = None,
    int8: bool = False,
    overrides: Optional[dict] = None,
    overrides_from: str = "the command line",
) -> Loaded:
    """A run directory (its best checkpoint) or checkpoint file, or several as one ensemble,
    on `device` (default: see `decoding_device`) in `precision` (default: fp32 on a CPU, the
    run's own on a GPU); `int8` quantizes the linear layers dynamically (CPU only, fp32
    activations); `overrides` are decode.* settings, checked as the config's (errors name
    `overrides_from`, where the caller's user wrote them). With
    decode.language_vocab the tokenizer gets its target languages' piece counts, read from the
    run's training data (`nmt.data.language_pieces`)."""
    _check_precision(precision, int8)
    if int8:
        device = device or "cpu"  # int8 decodes on the CPU whatever the run trained on
        check_int8_device(device)  # before loading anything
    targets = [str(target)] if isinstance(target, (str, Path)) else [str(t) for t in target]
    if not targets:
        raise NmtError("nothing to decode with: no checkpoint or run directory given")
    cfg, model, tok, meta = load_models(targets, "cpu")
    dev = decoding_device(device, cfg)
    p = _decoding_precision(precision, cfg, dev, int8)
    model = quantize_int8(model) if int8 else for_cpu_decoding(model, dev, p)
    model.to(dev)
    if overrides:
        cfg = with_decode_options(cfg, overrides, overrides_from)
    if cfg.decode.language_vocab:
        tok.piece_counts = count_target_pieces(cfg.data, tok)
        check_min_count(tok, cfg.decode.language_vocab)
    return Loaded(cfg, model, tok, meta, dev, p, int8)
