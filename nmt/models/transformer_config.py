"""The Transformer's config keys (torch-free: checking a config never imports torch; the
architecture itself is `transformer.py`, beside this file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from nmt.config import ModelConfig, opt
from nmt.errors import NmtError


@dataclass
class TransformerConfig(ModelConfig):
    d_model: int = opt(256, "model width", lo=1)
    heads: int = opt(4, "attention heads (must divide d_model)", lo=1)
    ff: int = opt(1024, "feed-forward size", lo=1)
    attention_dropout: float = opt(
        0.0,
        "dropout on attention weights (0 keeps the fused attention kernel on CPU)",
        lo=0.0,
        hi=1.0,
        hi_open=True,
    )
    activation_dropout: Optional[float] = opt(
        None,
        "dropout inside the feed-forward, after its activation (Marian's activation_dropout); "
        "null: model.dropout",
        lo=0.0,
        hi=1.0,
        hi_open=True,
    )
    norm: Literal["pre", "post"] = opt("pre", "layer-norm placement")
    positions: Literal["sinusoidal", "learned"] = opt("sinusoidal", "position encoding")
    max_positions: int = opt(1024, "longest sequence learned positions support", lo=1)
    sinusoid_layout: Literal["interleaved", "halves"] = opt(
        "interleaved",
        "sinusoidal positions: sin/cos interleaved (Vaswani et al.) or all sines then all "
        "cosines (Marian, Hugging Face MarianMTModel)",
    )
    scale_embeddings: bool = opt(True, "multiply embeddings by sqrt(d_model) before positions")
    activation: Literal["relu", "swish", "gelu"] = opt(
        "relu", "feed-forward activation (swish = SiLU, Marian's choice)"
    )
    final_logits_bias: bool = opt(
        False, "a bias on the output projection (Marian's final_logits_bias)"
    )
    tie_embeddings: bool = opt(False, "share source and target embeddings (needs vocab.joint)")
    tie_output: bool = opt(True, "tie the target embedding to the output projection")

    def check(self, cfg, where: str) -> None:
        if self.d_model % self.heads:
            raise NmtError(
                f"'model.d_model' ({self.d_model}) in {where} must be divisible by "
                f"'model.heads' ({self.heads})"
            )
        if self.tie_embeddings and not cfg.vocab.joint:
            raise NmtError(
                f"contradictory options in {where}: 'model.tie_embeddings' shares "
                f"source and target embeddings and needs 'vocab.joint: true'"
            )


CONFIGS = {"transformer": TransformerConfig}
