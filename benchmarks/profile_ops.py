"""What a torch.profiler run says, in one JSON shape for training steps and decoding.

`label_model` wraps the model's phases (encode, features, init_state, decode_step) and each layer
(the top-level modules and every layer of a ModuleList, `forward` and a decoder layer's `step`) in
profiler ranges; `breakdown` turns the profile into op time by op, by phase and by layer.
Backward ops run outside the forward ranges, so layers are forward (and decoding) time only;
the backward is one phase of its own.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import nn

MATMUL_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::mkldnn_rnn_layer",
    "aten::mkldnn_rnn_layer_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
}
PHASES = ("encode", "init_state", "features", "decode_step")


def _ranged(fn: Callable, label: str) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)

    return wrapper


def label_model(model: nn.Module) -> None:
    """Wrap the model's phases in 'phase: NAME' ranges and its layers in 'layer: NAME' ones
    (instance attributes: the class, and every other model, is untouched)."""
    for phase in PHASES:
        if hasattr(model, phase):
            setattr(model, phase, _ranged(getattr(model, phase), f"phase: {phase}"))
    for name, child in model.named_children():
        layers = (
            [(f"{name}.{i}", m) for i, m in enumerate(child)]
            if isinstance(child, nn.ModuleList)
            else [(name, child)]
        )
        for label, layer in layers:
            for method in ("forward", "step"):
                if hasattr(layer, method):
                    ranged = _ranged(getattr(layer, method), f"layer: {label}.{method}")
                    setattr(layer, method, ranged)


def _phase(name: str) -> str:
    if name.startswith("phase: "):
        return name.removeprefix("phase: ")
    if name.startswith("autograd::engine::evaluate_function"):
        return "backward"
    if name.startswith("Optimizer."):
        return "optimizer"
    return "other"


def breakdown(prof: Any, wall_s: float, top: int = 15) -> dict:
    """Op self time (by op, and the matmul share of it), then inclusive time (ops and the Python
    between them) by phase and by layer as shares of the wall time. Phases are the top-level
    ranges: 'other' is what ran outside the model's phases, the backward and the optimizer
    (the loss, casts, clipping, a search's bookkeeping)."""
    ops = prof.key_averages()
    real_ops = [e for e in ops if not e.key.startswith(("phase: ", "layer: "))]
    total = sum(e.self_cpu_time_total for e in real_ops) / 1e6
    matmul = sum(e.self_cpu_time_total for e in real_ops if e.key in MATMUL_OPS) / 1e6
    phases: dict[str, float] = {}
    for e in prof.events():
        if e.cpu_parent is None:
            key = _phase(e.name)
            phases[key] = phases.get(key, 0.0) + e.cpu_time_total / 1e6
    layers = {
        e.key.removeprefix("layer: "): e.cpu_time_total / 1e6
        for e in ops
        if e.key.startswith("layer: ")
    }

    def shares(seconds: dict[str, float]) -> dict[str, dict]:
        ordered = sorted(seconds.items(), key=lambda kv: -kv[1])
        return {k: {"s": round(v, 4), "share_of_wall": round(v / wall_s, 4)} for k, v in ordered}

    return {
        "wall_s": round(wall_s, 4),
        "op_self_s": round(total, 4),
        "op_share_of_wall": round(total / wall_s, 4),
        "matmul_share_of_ops": round(matmul / total, 4),
        "phases": shares(phases),
        "layers": shares(layers),
        "top_ops": [
            {
                "op": e.key,
                "calls": e.count,
                "self_s": round(e.self_cpu_time_total / 1e6, 4),
                "share": round(e.self_cpu_time_total / 1e6 / total, 4),
            }
            for e in sorted(real_ops, key=lambda e: -e.self_cpu_time_total)[:top]
        ],
    }
