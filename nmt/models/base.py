"""The interface every architecture implements, so greedy and beam search are written once.

All tensors are batch-first. Token ids: PAD=0, UNK=1, BOS=2, EOS=3 (fixed in nmt.data.tokenizer).

    forward(src, src_mask, tgt_in) -> logits [B, T, V]           teacher forcing
    encode(src, src_mask) -> EncoderOut
    init_state(enc) -> State                                     decoder state before step 0
    decode_step(state, prev_tokens [B]) -> (log_probs [B, V] fp32, State, attn [B, S] | None)
        (log_probs is a new tensor: the search overwrites it in place)
    State.select(index [B']) -> State                            gather rows (beam reorder/expand)
    compile_regions(compile_fn) -> bool                          what train.compile compiles
        (default False: the whole model; rnnsearch compiles its decoder step)
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from torch import Tensor, nn

from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.errors import NmtError

# Source lengths already on the host (the trainer knows them from the CPU batch), so a model that
# packs sequences needs no device -> host copy of the mask's sums. Any architecture may read them.
_HOST_LENGTHS: ContextVar[Optional[Tensor]] = ContextVar("host_lengths", default=None)


@contextmanager
def host_lengths(lengths: Tensor) -> Iterator[None]:
    """Within this block, `given_host_lengths()` returns these CPU source lengths."""
    token = _HOST_LENGTHS.set(lengths)
    try:
        yield
    finally:
        _HOST_LENGTHS.reset(token)


def given_host_lengths() -> Optional[Tensor]:
    """The CPU source lengths of the batch being run, when the caller gave them."""
    return _HOST_LENGTHS.get()


def _select(x: Any, index: Tensor) -> Any:
    if isinstance(x, Tensor):
        return x.index_select(0, index)
    if isinstance(x, (list, tuple)):
        return type(x)(_select(v, index) for v in x)
    if isinstance(x, dict):
        return {k: _select(v, index) for k, v in x.items()}
    return x  # ints, None, flags: shared by all rows


def linear_relu_pairs(model: nn.Module) -> list[tuple[nn.Sequential, str, str]]:
    """(sequential, linear name, relu name) for every nn.Linear directly followed by an nn.ReLU
    inside an nn.Sequential (the transformer's feed-forward): the pairs that inference kernels
    (oneDNN fp32, fbgemm int8) run as one."""
    out = []
    for seq in model.modules():
        if isinstance(seq, nn.Sequential):
            names = list(seq._modules)
            for a, b in zip(names, names[1:]):
                if type(seq._modules[a]) is nn.Linear and type(seq._modules[b]) is nn.ReLU:
                    out.append((seq, a, b))
    return out


@dataclass
class EncoderOut:
    memory: Tensor  # [B, S, H] encoder states
    mask: Tensor  # [B, S] bool, True at real (non-pad) source positions
    final: Any = None  # architecture-specific summary (e.g. the RNN final state)


@dataclass
class State:
    """Decoder state: a dict of batch-first tensors (or nested lists/tuples of them).

    `select` gathers the same rows from every tensor, which is all beam search needs.
    """

    tensors: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    def select(self, index: Tensor) -> "State":
        return State(_select(self.tensors, index), self.step)

    def __getitem__(self, key: str) -> Any:
        return self.tensors[key]


class NMTModel(nn.Module):
    """Base class: subclasses implement encode, init_state, decode_step and forward."""

    pad_id: int = PAD  # the special ids are the tokenizer's (defined once, there)
    bos_id: int = BOS
    eos_id: int = EOS

    def __init__(self) -> None:
        super().__init__()
        # Which cross-attention decode_step reports for the transformer: layer index and head
        # (None = mean over heads). RNN models ignore it.
        self.attn_layer: int = -1
        self.attn_head: Optional[int] = None

    def set_attention_view(self, layer: int = -1, head: Optional[int] = None) -> None:
        """Choose the cross-attention decode_step reports (layer, head; None = mean of heads)."""
        layers, heads = self.attention_shape()
        if not -layers <= layer < layers:
            raise NmtError(
                f"--attention-layer {layer} out of range: the model has {layers} "
                f"decoder layer(s) (use 0..{layers - 1} or -1 for the last)"
            )
        if head is not None and not 0 <= head < heads:
            raise NmtError(
                f"--attention-head {head} out of range: the model has {heads} head(s) "
                f"(use 0..{heads - 1}, or omit for the mean)"
            )
        self.attn_layer, self.attn_head = layer, head

    def attention_shape(self) -> tuple[int, int]:
        """(decoder layers, heads) of the reported attention; RNN alignments are one of each."""
        return 1, 1

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        raise NotImplementedError

    def init_state(self, enc: EncoderOut) -> State:
        raise NotImplementedError

    def decode_step(
        self, state: State, prev_tokens: Tensor
    ) -> tuple[Tensor, State, Optional[Tensor]]:
        raise NotImplementedError

    def features(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing up to the vocabulary projection: its input, [B, T, F]."""
        raise NotImplementedError

    def vocab_projection(self) -> nn.Linear:
        """The last layer, features -> logits."""
        raise NotImplementedError

    @property
    def has_features(self) -> bool:
        """Whether this architecture implements `features` and `vocab_projection`; one that
        overrides `forward` alone still trains, on its logits."""
        return type(self).features is not NMTModel.features

    def forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, features: bool = False
    ) -> Tensor:
        """Teacher-forced logits [B, T, V]; with `features`, the projection's input [B, T, F]
        (the training loss applies the projection itself, a chunk of tokens at a time)."""
        h = self.features(src, src_mask, tgt_in)
        return h if features else self.vocab_projection()(h)

    def compile_regions(self, compile_fn: Callable[[Callable], Callable]) -> bool:
        """Put the parts of teacher forcing a compiler should see under `compile_fn`, in place,
        and return True; False (the default): the caller compiles the whole model. A model
        whose `features` loops over target steps in Python compiles one step instead, since
        the compiler would unroll the loop into a graph per target length."""
        return False

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def matmul_flops_per_token(self, src_len: float, tgt_len: float) -> float:
        """Approximate forward matmul FLOPs per target token (for MFU); subclasses refine."""
        return 2.0 * self.num_parameters()
