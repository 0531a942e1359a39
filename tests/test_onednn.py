"""oneDNN linears for fp32 CPU decoding: the same numbers as nn.Linear (to summation order), the
same parameters, the same translations; training, autocast and other devices keep the stock
kernel."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from conftest import TINY_MODELS, make_config, tiny_model
from nmt.config import DecodeConfig
from nmt.decode import translate_ids
from nmt.models import build_model, onednn
from nmt.models.onednn import (
    OneDnnLinear,
    for_cpu_decoding,
    onednn_available,
    use_onednn_linears,
)
from nmt.precision import cpuinfo_field

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this torch has no oneDNN")

MODELS = {**TINY_MODELS, "transformer": tiny_model("transformer", d_model=64, heads=4, ff=128)}


def model_of(arch: str) -> nn.Module:
    torch.manual_seed(0)
    cfg = make_config(model=MODELS[arch])
    model = build_model(cfg.model, 50, 50).eval()
    with torch.no_grad():  # sharpen the untrained distributions: greedy choices are clear-cut
        for p in model.parameters():
            p.mul_(2.0)
    return model


INPUTS = {
    "2-d": lambda: torch.randn(7, 32),
    "3-d": lambda: torch.randn(3, 5, 32),
    "one row": lambda: torch.randn(1, 1, 32),
    "no rows": lambda: torch.randn(0, 32),
    "strided": lambda: torch.randn(6, 64)[:, ::2],
    "transposed": lambda: torch.randn(32, 5).t(),
}


@pytest.mark.parametrize("inputs", sorted(INPUTS))
@pytest.mark.parametrize("bias", [True, False])
def test_a_onednn_linear_computes_what_nn_linear_does(inputs, bias):
    torch.manual_seed(0)
    stock = nn.Linear(32, 48, bias=bias)
    fast = use_onednn_linears(nn.Sequential(copy.deepcopy(stock)))[0]
    x = INPUTS[inputs]()
    with torch.inference_mode():
        assert isinstance(fast, OneDnnLinear)
        torch.testing.assert_close(fast(x), stock(x), rtol=1e-5, atol=1e-5)


def test_a_linear_before_a_relu_takes_the_relu_into_its_kernel():
    torch.manual_seed(0)
    stock = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    fast = use_onednn_linears(copy.deepcopy(stock))
    assert [type(m) for m in fast] == [OneDnnLinear, nn.Identity, OneDnnLinear]
    assert fast[0].activation == "relu"
    x = torch.randn(4, 16)
    with torch.inference_mode():
        torch.testing.assert_close(fast(x), stock(x), rtol=1e-5, atol=1e-5)
    # with gradients on (training), the stock kernel runs, the ReLU still applies
    loss = fast(x).pow(2).sum()
    loss.backward()
    torch.testing.assert_close(loss, stock(x).pow(2).sum(), rtol=1e-5, atol=1e-5)
    assert fast[0].weight.grad is not None


def test_the_converted_transformer_keeps_its_parameters_and_tied_weights():
    model = model_of("transformer")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    use_onednn_linears(model)
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert model.out.weight is model.tgt_emb.weight
    assert not any(type(m) is nn.Linear for m in model.modules())


@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("beam", [1, 5])
def test_every_architecture_translates_the_same_with_onednn_linears(arch, beam):
    model = model_of(arch)
    fast = use_onednn_linears(copy.deepcopy(model))
    g = torch.Generator().manual_seed(1)
    src = [torch.randint(4, 50, (int(n),), generator=g).tolist() + [3] for n in range(3, 23)]
    cfg = DecodeConfig(batch_tokens=200)
    ours = translate_ids(fast, src, cfg, beam=beam)
    stock = translate_ids(model, src, cfg, beam=beam)
    assert [h[0].tokens for h in ours] == [h[0].tokens for h in stock]
    for a, b in zip(ours, stock):
        assert a[0].score == pytest.approx(b[0].score, abs=1e-3)


def test_autocast_and_fp16_keep_the_stock_kernel():
    torch.manual_seed(0)
    fast = use_onednn_linears(nn.Sequential(nn.Linear(16, 8)))[0]
    x = torch.randn(4, 16)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert fast(x).dtype == torch.bfloat16
    with torch.inference_mode():
        assert fast.to(torch.bfloat16)(x.bfloat16()).dtype == torch.bfloat16


def test_only_fp32_cpu_decoding_switches_kernels(monkeypatch):
    monkeypatch.setattr(onednn, "cpu_vendor", lambda: "AuthenticAMD")
    assert isinstance(
        for_cpu_decoding(nn.Sequential(nn.Linear(4, 4)), "cpu", "fp32")[0], OneDnnLinear
    )
    kept = for_cpu_decoding(nn.Sequential(nn.Linear(4, 4)), "cpu", "bf16")[0]
    assert type(kept) is nn.Linear


def test_an_intel_cpu_keeps_the_stock_onemkl_linears(monkeypatch):
    monkeypatch.setattr(onednn, "cpu_vendor", lambda: "GenuineIntel")
    kept = for_cpu_decoding(nn.Sequential(nn.Linear(4, 4)), "cpu", "fp32")[0]
    assert type(kept) is nn.Linear


def test_the_cpu_vendor_and_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2\n")
    assert cpuinfo_field("vendor_id", str(info)) == "AuthenticAMD"
    assert cpuinfo_field("flags", str(info)).split() == ["fpu", "avx2"]
    assert cpuinfo_field("vendor_id", str(tmp_path / "missing")) == ""
