"""fp32 CPU decoding with oneDNN's matmul kernels for the linear layers.

torch's fp32 `nn.Linear` on a CPU calls oneMKL, which picks its kernels by CPU vendor: on an AMD
Zen 5 (AVX-512) it ran the decoder's shapes at 80-100 GFLOP/s per core, where oneDNN, which
picks by instruction set, ran the same products at 160-210 (`scripts/benchmark_export.py`
measures the decoding speed-up). Both compute in fp32 with fp32 accumulation: the outputs differ
from oneMKL's only in summation order. `torch.ops.mkldnn._linear_pointwise` is the op that
torch's own compiler emits for CPU linears; the layers keep their parameters (tied weights stay
tied, checkpoints load and save the same), only `forward` changes. The feed-forward's first
layer also fuses its ReLU.

oneMKL is Intel's library and fast on Intel CPUs: on a 2-core Intel Xeon (family 6 model 207) the
stock linears decoded 1.17x faster than oneDNN greedy and 1.02x with beam 5
(benchmarks/benchmark-export-2core-intel.json), so the switch is made on other vendors only.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.models.base import linear_relu_pairs
from nmt.precision import cpu_vendor


def onednn_available() -> bool:
    """True where this torch has oneDNN's CPU linear op (x86 and arm64 builds do)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class OneDnnLinear(nn.Linear):
    """nn.Linear whose forward runs oneDNN's fp32 matmul, optionally fused with a ReLU."""

    activation: str = "none"

    def forward(self, x: Tensor) -> Tensor:
        if (
            x.device.type != "cpu"
            or x.dtype != torch.float32
            or torch.is_grad_enabled()
            or torch.is_autocast_enabled("cpu")
        ):
            out = super().forward(x)  # training, GPU or autocast: the stock kernel
            return torch.relu(out) if self.activation == "relu" else out
        return torch.ops.mkldnn._linear_pointwise(
            x, self.weight, self.bias, self.activation, [], ""
        )


def _convert(linear: nn.Linear, activation: str = "none") -> None:
    linear.__class__ = OneDnnLinear
    linear.activation = activation


def use_onednn_linears(model: nn.Module) -> nn.Module:
    """Switch `model`'s nn.Linear layers (in place) to oneDNN kernels for fp32 inference on the
    CPU; a Linear followed by a ReLU in an nn.Sequential takes the ReLU into its kernel. A model
    whose torch lacks oneDNN is returned unchanged."""
    if not onednn_available():
        return model
    for seq, linear, relu in linear_relu_pairs(model):
        _convert(seq._modules[linear], "relu")
        seq._modules[relu] = nn.Identity()
    for module in model.modules():
        if type(module) is nn.Linear:
            _convert(module)
    return model


def onednn_beats_onemkl() -> bool:
    """Whether oneDNN's linears decode faster than torch's stock oneMKL ones on this CPU: yes
    except on Intel, where oneMKL picks its best kernels (measured: module docstring)."""
    return cpu_vendor() != "GenuineIntel"


def for_cpu_decoding(model: nn.Module, device: str | torch.device, precision: str) -> nn.Module:
    """The model `nmt translate`, `evaluate` and the server decode with: oneDNN linears when
    decoding runs in fp32 on a non-Intel CPU (see `nmt.precision.decode_precision` and
    `onednn_beats_onemkl`), else unchanged."""
    if torch.device(device).type == "cpu" and precision == "fp32" and onednn_beats_onemkl():
        return use_onednn_linears(model)
    return model
