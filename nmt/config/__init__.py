"""Typed configuration. The package itself exports only the torch-free schema (the section
dataclasses and `opt`), so model modules can declare their config classes without importing the
loader; load, validate and dump configs with `nmt.config.load`."""

from nmt.config.schema import (
    REQUIRED,
    Config,
    DataConfig,
    DecodeConfig,
    EvalConfig,
    ModelConfig,
    SyntheticConfig,
    TrainConfig,
    VocabConfig,
    opt,
)

__all__ = [
    "REQUIRED",
    "Config",
    "DataConfig",
    "DecodeConfig",
    "EvalConfig",
    "ModelConfig",
    "SyntheticConfig",
    "TrainConfig",
    "VocabConfig",
    "opt",
]
