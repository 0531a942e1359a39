"""int8 CPU inference: dynamic quantization of every nn.Linear, for any architecture.

Weights are stored as int8 with one scale per output channel; activations are quantized per
batch on the fly and the matmul runs in fbgemm's int8 kernels (x86 CPUs). Embeddings, layer
norms and recurrent cells stay fp32. torch 2.13 still ships `torch.ao.quantization.
quantize_dynamic` but marks it deprecated in favour of torchao; it is used here because it is the
fastest int8 path this torch has on CPU (`torch._int_mm` has no fast CPU kernel: measured 13-25x
slower than the fp32 matmul on this project's AVX2 CPU), and its deprecation warnings are silenced.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from nmt.errors import NmtError
from nmt.models.base import linear_relu_pairs


def check_int8_device(device: str | torch.device) -> None:
    """int8 inference runs on the CPU only; anything else is a one-line error."""
    if torch.device(device).type != "cpu":
        raise NmtError(
            f"--int8 runs on the CPU only (dynamic int8 quantization), but --device is "
            f"{device}; drop --int8 or use --device cpu"
        )


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` (eval mode, CPU) whose nn.Linear layers compute in int8."""
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError:
        raise NmtError(
            f"--int8 needs torch's dynamic quantization, which torch "
            f"{torch.__version__} does not provide"
        ) from None
    if (
        "fbgemm" not in torch.backends.quantized.supported_engines
        and "x86" not in torch.backends.quantized.supported_engines
    ):
        raise NmtError(
            "--int8 needs an x86 CPU (torch's fbgemm int8 kernels); this machine has "
            f"only {torch.backends.quantized.supported_engines}"
        )
    import torch.ao.nn.intrinsic as nni
    from torch.ao.quantization import fuse_modules

    model = copy.deepcopy(model).cpu().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notices about torch.ao, not about this model
        # A Linear followed by a ReLU runs as one int8 kernel (fbgemm's linear_relu_dynamic):
        # the separate ReLU was 6% of int8 greedy decoding on the Multi30k Transformer.
        for seq, linear, relu in linear_relu_pairs(model):
            fuse_modules(seq, [[linear, relu]], inplace=True)
        spec = {nn.Linear: per_channel_dynamic_qconfig, nni.LinearReLU: per_channel_dynamic_qconfig}
        return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
