"""Architecture registry: `@register("name")` on a builder; `build_model(cfg, ...)` looks it up."""
from __future__ import annotations

import difflib
from typing import Callable

from nmt.config import ModelConfig
from nmt.errors import NmtError
from nmt.models.base import NMTModel

Builder = Callable[[ModelConfig, int, int], NMTModel]
_REGISTRY: dict[str, Builder] = {}


def register(name: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        if name in _REGISTRY:
            raise ValueError(f"architecture {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn
    return deco


def architectures() -> list[str]:
    return sorted(_REGISTRY)


def check_architecture(name: str) -> None:
    """Fail on an unregistered name, suggesting the closest one (as config keys do)."""
    if name in _REGISTRY:
        return
    close = difflib.get_close_matches(name, architectures(), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise NmtError(f"unknown architecture 'model.arch: {name}'; {hint}expected one of "
                   f"{', '.join(architectures())}")


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> NMTModel:
    """Build the architecture named by `cfg.arch` for the given vocabulary sizes."""
    check_architecture(cfg.arch)
    return _REGISTRY[cfg.arch](cfg, src_vocab, tgt_vocab)
