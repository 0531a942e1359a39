"""Models: each architecture registers itself (`@register`) in its own file, found by the
registry when a model is first built, so adding an architecture is adding one file here.

Nothing is imported with the package itself: the shipped architectures' config keys live in
torch-free `*_config.py` modules beside them, and checking a config must not import torch.
"""

import importlib

_EXPORTS = {
    "EncoderOut": "nmt.models.base",
    "NMTModel": "nmt.models.base",
    "State": "nmt.models.base",
    "architectures": "nmt.models.registry",
    "build_model": "nmt.models.registry",
    "config_classes": "nmt.models.registry",
    "register": "nmt.models.registry",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = sorted(_EXPORTS)
