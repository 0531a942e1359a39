"""Models: importing this package registers every architecture."""
from nmt.models import rnnsearch, seq2seq, transformer  # noqa: F401  (registration side effect)
from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.registry import architectures, build_model, check_architecture, register

__all__ = ["EncoderOut", "NMTModel", "State", "architectures", "build_model",
           "check_architecture", "register"]
