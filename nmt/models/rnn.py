"""Pieces shared by the two RNN architectures (seq2seq and rnnsearch): the recurrent layers, a
run over real tokens only (packed on a GPU, padded on a CPU), and the deep output layer."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from nmt.models.base import given_host_lengths
from nmt.precision import bf16_is_fast


def gates(rnn_type: str) -> int:
    """Gate blocks per hidden unit: GRU r, z, n; LSTM i, f, g, o."""
    return 3 if rnn_type == "gru" else 4


def make_rnn(
    rnn_type: str,
    input_size: int,
    hidden: int,
    layers: int,
    dropout: float,
    bidirectional: bool = False,
) -> nn.RNNBase:
    cls = nn.GRU if rnn_type == "gru" else nn.LSTM
    return cls(
        input_size,
        hidden,
        layers,
        batch_first=True,
        bidirectional=bidirectional,
        dropout=dropout if layers > 1 else 0.0,
    )


def recurrent_dtype(device: torch.device) -> Optional[torch.dtype]:
    """The dtype the recurrent layers run in under autocast (None: autocast is off).

    Autocast's own choice is wrong both ways: on CUDA it casts cuDNN RNNs to fp16 even in a bf16
    region (no GradScaler there, so small encoder gradients underflow), and on a CPU without
    bf16 units it sends an unpacked LSTM to a oneDNN bf16 kernel that does not exist. So: fp16
    in an fp16 region (which has a GradScaler); bf16 in a bf16 region where the device runs bf16
    natively (cuDNN on Ampere and later, CPUs with AVX512-BF16/AMX); fp32 everywhere else.
    """
    kind = device.type
    if kind not in ("cpu", "cuda") or not torch.is_autocast_enabled(kind):
        return None
    amp = torch.get_autocast_dtype(kind)
    if amp == torch.float16 and kind == "cuda":
        return torch.float16
    if amp == torch.bfloat16 and bf16_is_fast(device):
        return torch.bfloat16
    return torch.float32


def run_rnn(rnn: nn.RNNBase, x, hx=None):
    """`rnn(x, hx)` in `recurrent_dtype`, outside autocast; outputs come back in that dtype.

    In a lower precision the fp32 weights are cast for the call (as autocast would), so their
    gradients still reach the fp32 master weights."""
    data = x.data if isinstance(x, PackedSequence) else x
    dtype = recurrent_dtype(data.device)
    if dtype is None:
        return rnn(x, hx)
    cast = lambda t: t.to(dtype) if t is not None and t.is_floating_point() else t  # noqa: E731
    if isinstance(x, PackedSequence):
        x = x._replace(data=cast(x.data))
    else:
        x = cast(x)
    if hx is not None:
        hx = tuple(map(cast, hx)) if isinstance(hx, tuple) else cast(hx)
    with torch.autocast(data.device.type, enabled=False):
        if dtype == torch.float32:
            return rnn(x, hx)
        weights = {n: cast(p) for n, p in rnn.named_parameters()}
        return functional_call(rnn, weights, (x, hx))


def run_masked(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Run `rnn` over each row's real positions only, so padding never touches the states.

    Returns outputs [B, S, dirs*H] (zeros at pads) and the final hidden states
    [layers*dirs, B, H] (for LSTMs the h part). Rows are right-padded.
    """
    if x.device.type == "cpu":
        return _run_padded(rnn, x, mask)
    # An all-pad row (length 0) cannot be packed; reading one pad token keeps it finite.
    lengths = given_host_lengths()
    if lengths is None or lengths.device.type != "cpu" or lengths.size(0) != mask.size(0):
        lengths = mask.sum(1).cpu()  # a device -> host copy: one sync on a GPU
    packed = pack_padded_sequence(x, lengths.clamp(min=1), batch_first=True, enforce_sorted=False)
    out, h_n = run_rnn(rnn, packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, (h_n[0] if isinstance(h_n, tuple) else h_n)


def reversal_index(n: Tensor, length: int) -> Tensor:
    """[B, length] gather index that reverses each row's first n[b] positions (n: [B, 1]) and
    leaves the rest in place; applying it twice restores the order."""
    pos = torch.arange(length, device=n.device).unsqueeze(0)
    return torch.where(pos < n, n - 1 - pos, pos)


def _run_padded(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """`run_masked` without packing, for the CPU: torch's CPU RNNs over a PackedSequence cut the
    input per time step, and each cut's backward adds a zero-filled gradient of the whole input,
    so the backward grew with the square of the length (a GRU of 320 over 55 x 69 tokens, one
    thread on a Zen 4: 255 ms packed, 134 ms padded). Each direction runs over the padded
    batch; the forward one meets the pads only after the real tokens, and the backward one runs
    on each row's real tokens reversed in place (pads stay last), then is put back in order."""
    B, S = mask.shape
    n = mask.sum(1, keepdim=True).clamp(min=1)  # [B, 1]; an all-pad row reads one pad
    flip = reversal_index(n, S).unsqueeze(-1)  # [B, S, 1], its own inverse
    rows = torch.arange(B, device=x.device)
    dirs = 2 if rnn.bidirectional else 1
    out, finals = x, []
    for layer in range(rnn.num_layers):
        if layer > 0:
            out = F.dropout(out, rnn.dropout, rnn.training)
        outs = []
        for d in range(dirs):
            seq = out if d == 0 else out.gather(1, flip.expand(-1, -1, out.size(-1)))
            y = _direction(rnn, layer, d == 1, seq)
            finals.append(y[rows, n[:, 0] - 1])  # the state after each row's last real token
            outs.append(y if d == 0 else y.gather(1, flip.expand(-1, -1, y.size(-1))))
        out = torch.cat(outs, -1) if dirs == 2 else outs[0]
    return out.masked_fill(~mask.unsqueeze(-1), 0.0), torch.stack(finals)


def _direction(rnn: nn.RNNBase, layer: int, reverse: bool, x: Tensor) -> Tensor:
    """Outputs [B, S, H] of one layer and direction of `rnn` over x from a zero state, run in
    `recurrent_dtype` like `run_rnn`."""
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if rnn.bias else ())
    weights = [getattr(rnn, name + suffix) for name in names]
    dtype = recurrent_dtype(x.device)
    if dtype is not None:
        x, weights = x.to(dtype), [w.to(dtype) for w in weights]
    h0 = x.new_zeros(1, x.size(0), rnn.hidden_size)
    with torch.autocast(x.device.type, enabled=False) if dtype is not None else nullcontext():
        if rnn.mode == "GRU":
            return torch._VF.gru(x, h0, weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
        return torch._VF.lstm(x, (h0, h0), weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]


class DeepOutput(nn.Module):
    """Features -> logits through one hidden layer of `size` units (Pascanu et al. 2014):
    maxout (pool 2, as in Cho/Bahdanau), tanh, or none (a single vocabulary projection)."""

    def __init__(self, kind: str, in_size: int, size: int, vocab: int) -> None:
        super().__init__()
        self.kind, self.size = kind, size
        widths = {"maxout": 2 * size, "tanh": size}
        self.hidden = nn.Linear(in_size, widths[kind]) if kind in widths else None
        self.proj = nn.Linear(size if self.hidden is not None else in_size, vocab)

    def features(self, x: Tensor) -> Tensor:
        """The hidden layer's output: what `proj` maps to logits."""
        if self.kind == "maxout":
            h = self.hidden(x)
            return h.view(*h.shape[:-1], self.size, 2).amax(-1)
        if self.kind == "tanh":
            return torch.tanh(self.hidden(x))
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(self.features(x))

    def flops(self) -> float:
        mods = [self.proj] + ([self.hidden] if self.hidden is not None else [])
        return sum(2.0 * m.in_features * m.out_features for m in mods)
