"""Models: importing this package imports every module in it, which registers each architecture
(`@register`), so adding an architecture is adding one file here."""

import importlib
import pkgutil

from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.registry import architectures, build_model, config_classes, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "EncoderOut",
    "NMTModel",
    "State",
    "architectures",
    "build_model",
    "config_classes",
    "register",
]
