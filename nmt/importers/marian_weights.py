"""Our Transformer's parameters under Hugging Face MarianMTModel's names, and the permutation of
the model dimension that maps one sinusoid layout onto the other.

Both are post-norm encoder-decoders with the same sublayers: attention q/k/v/out with biases,
fc1 -> activation -> fc2, a LayerNorm after each residual sum, no final LayerNorm. Embeddings and
the output projection are not listed here: their rows follow the vocabulary, which the importer
and exporter map themselves.
"""

from __future__ import annotations

from torch import Tensor

ATTENTION = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}


def _linear(ours: str, theirs: str) -> list[tuple[str, str]]:
    return [(f"{ours}.{p}", f"{theirs}.{p}") for p in ("weight", "bias")]


def layer_names(layers: int) -> list[tuple[str, str]]:
    """(our name, MarianMTModel name) of every per-layer parameter."""
    out = []
    for i in range(layers):
        for side, blocks in (
            ("encoder", (("self_attn", "self_attn"),)),
            ("decoder", (("self_attn", "self_attn"), ("cross_attn", "encoder_attn"))),
        ):
            ours, theirs = f"{side}.{i}", f"model.{side}.layers.{i}"
            norms = ["self_attn_layer_norm"]
            for a, b in blocks:
                for x, y in ATTENTION.items():
                    out += _linear(f"{ours}.{a}.{x}", f"{theirs}.{b}.{y}")
            if side == "decoder":
                norms.append("encoder_attn_layer_norm")
            norms.append("final_layer_norm")
            out += _linear(f"{ours}.ff.0", f"{theirs}.fc1") + _linear(
                f"{ours}.ff.3", f"{theirs}.fc2"
            )
            for k, norm in enumerate(norms, 1):
                out += _linear(f"{ours}.norm{k}", f"{theirs}.{norm}")
    return out


def halves_order(d: int) -> list[int]:
    """Model dimensions in Marian's order: position j of a Marian vector holds our interleaved
    dimension order[j] (the sines' dimensions 0, 2, 4, ..., then the cosines' 1, 3, 5, ...)."""
    return list(range(0, d, 2)) + list(range(1, d, 2))


def permute_model_dim(state: dict[str, Tensor], order: list[int]) -> dict[str, Tensor]:
    """Our state dict with the model dimension permuted (new[j] = old[order[j]]) wherever it
    appears: embedding and output columns, LayerNorms, the inputs of q/k/v and fc1, the outputs of
    the attention output and fc2. Every sublayer maps the permuted residual stream to the
    permuted residual stream, so the model computes the same function on permuted positions."""
    out = {}
    for name, t in state.items():
        *path, kind = name.split(".")
        module = path[-1]
        if module in ("src_emb", "tgt_emb", "out") and kind == "weight":
            t = t[:, order]
        elif module.startswith("norm") or module in ("enc_norm", "dec_norm"):
            t = t[order]
        elif module in ("q", "k", "v") or name.endswith("ff.0.weight"):
            t = t[:, order] if kind == "weight" else t
        elif module == "o" or ".ff.3." in name:
            t = t[order]  # weight rows or bias
        out[name] = t.contiguous()
    return out
