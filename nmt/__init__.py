"""nmt: neural machine translation from YAML configs (seq2seq, RNNsearch, Transformer)."""

from nmt.version import __version__

__all__ = ["Translator", "__version__"]


def __getattr__(name: str):
    # `from nmt import Translator` without importing torch for every `import nmt`.
    if name == "Translator":
        from nmt.api import Translator

        return Translator
    raise AttributeError(f"module 'nmt' has no attribute {name!r}")
