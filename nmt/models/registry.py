"""Architecture registry: `@register("name", config=NameConfig)` on a builder.

Each architecture declares its config dataclass (a `ModelConfig` subclass holding its own keys)
beside its model, so the config loader checks a `model:` section against the chosen
architecture's keys and `build_model(cfg, ...)` finds the builder by `cfg.arch`. Importing
`nmt.models` imports every module of the package, so a new architecture is one new file.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Callable

from nmt.config import ModelConfig
from nmt.errors import NmtError
from nmt.models.base import NMTModel

Builder = Callable[[ModelConfig, int, int], NMTModel]
_BUILDERS: dict[str, Builder] = {}
_CONFIGS: dict[str, type] = {}


def register(name: str, config: type = ModelConfig) -> Callable[[Builder], Builder]:
    """Register a builder `(cfg, src_vocab, tgt_vocab) -> NMTModel` and its config dataclass."""
    if not (isinstance(config, type) and issubclass(config, ModelConfig)):
        raise TypeError(f"architecture {name!r}: config must be a ModelConfig subclass")

    def deco(fn: Builder) -> Builder:
        if name in _BUILDERS:
            raise ValueError(f"architecture {name!r} registered twice")
        _BUILDERS[name], _CONFIGS[name] = fn, config
        config.arch_name = name  # names the architecture in config errors
        return fn

    return deco


def architectures() -> list[str]:
    _discover()
    return sorted(_BUILDERS)


def config_classes() -> dict[str, type]:
    """Architecture name -> its config dataclass."""
    _discover()
    return dict(_CONFIGS)


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> NMTModel:
    """Build the architecture named by `cfg.arch` for the given vocabulary sizes."""
    _discover()
    if cfg.arch not in _BUILDERS:
        raise NmtError(
            f"unknown architecture 'model.arch: {cfg.arch}'; expected one of "
            f"{', '.join(architectures())}"
        )
    if not isinstance(cfg, _CONFIGS[cfg.arch]):
        raise NmtError(
            f"model config for '{cfg.arch}' must be a "
            f"{_CONFIGS[cfg.arch].__name__}, got {type(cfg).__name__}"
        )
    return _BUILDERS[cfg.arch](cfg, src_vocab, tgt_vocab)


def _discover() -> None:
    """Import every module beside this one (each registers its architecture). Found by file, not
    by importing the `nmt.models` package, which imports this module: no import circle."""
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{module.name}")
