"""Precision: what `auto` picks, the dtype recurrent layers run in under autocast, bf16 on CPU for
every architecture (forward, greedy and beam), dropout off the CPU, TF32, one-line errors."""

from __future__ import annotations

import pytest
import torch

import nmt.models.dropout as dropout_mod
import nmt.models.rnn as rnn_mod
import nmt.precision as precision
from nmt.config import DecodeConfig
from nmt.config.load import model_config
from nmt.decode import decode_batch
from nmt.errors import NmtError
from nmt.models import build_model

CPU = torch.device("cpu")
V = 20
VARIANTS = {
    "seq2seq-gru": ("seq2seq", {}),
    "seq2seq-lstm": ("seq2seq", dict(rnn_type="lstm", layers=2)),
    "rnnsearch-gru": ("rnnsearch", {}),
    "rnnsearch-lstm": ("rnnsearch", dict(rnn_type="lstm", layers=2)),
    "transformer": ("transformer", dict(layers=2)),
}


def _sources() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [11, 3, 0, 0, 0]])
    return src, src != 0


def _rnn_output(rnn_type: str, bidirectional: bool, packed: bool) -> torch.Tensor:
    torch.manual_seed(0)
    rnn = rnn_mod.make_rnn(rnn_type, 8, 16, 2, 0.0, bidirectional=bidirectional)
    x = torch.randn(3, 5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if packed:
            return rnn_mod.run_masked(rnn, x, _sources()[1])[0]
        return rnn_mod.run_rnn(rnn, x)[0]


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional,packed", [(True, True), (False, True), (False, False)])
def test_recurrent_layers_run_in_fp32_under_bf16_autocast_without_bf16_units(
    monkeypatch, rnn_type, bidirectional, packed
):
    # An unpacked LSTM under CPU bf16 autocast used to crash in oneDNN ("could not create a
    # primitive descriptor for the LSTM forward propagation primitive").
    monkeypatch.setattr(rnn_mod, "bf16_is_fast", lambda device: False)
    out = _rnn_output(rnn_type, bidirectional, packed)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_recurrent_layers_run_in_bf16_where_the_device_runs_bf16(monkeypatch, rnn_type):
    monkeypatch.setattr(rnn_mod, "bf16_is_fast", lambda device: True)
    torch.manual_seed(0)
    rnn = rnn_mod.make_rnn(rnn_type, 8, 16, 1, 0.0, bidirectional=True)
    x = torch.randn(3, 5, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = rnn_mod.run_masked(rnn, x, _sources()[1])
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    # the bf16 copies were made for the call: the gradient lands on the fp32 master weights
    assert rnn.weight_ih_l0.grad is not None and rnn.weight_ih_l0.grad.dtype == torch.float32
    assert rnn.weight_ih_l0.grad.abs().sum() > 0


def test_recurrent_layers_keep_their_dtype_outside_autocast():
    assert rnn_mod.recurrent_dtype(CPU) is None
    rnn = rnn_mod.make_rnn("lstm", 8, 16, 1, 0.0)
    assert rnn_mod.run_rnn(rnn, torch.randn(2, 3, 8))[0].dtype == torch.float32


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_architecture_trains_and_decodes_under_bf16_autocast_on_cpu(name):
    arch, kw = VARIANTS[name]
    torch.manual_seed(0)
    sizes = (
        dict(d_model=32, heads=4, ff=64)
        if arch == "transformer"
        else dict(emb_size=16, hidden_size=32)
    )
    model = build_model(model_config(arch, dropout=0.1, **sizes, **kw), V, V)
    src, mask = _sources()
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0], [2, 10, 0, 0]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, mask, tgt_in)
        logits.float().logsumexp(-1).sum().backward()
        model.eval()
        for beam in (1, 3):
            hyps = decode_batch(model, src, mask, DecodeConfig(beam=beam, max_len_b=4), beam)
            assert len(hyps) == 3 and all(torch.isfinite(torch.tensor(h[0].score)) for h in hyps)
    assert torch.isfinite(logits.float()).all()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


def test_transformer_attention_under_bf16_autocast_on_cpu_skips_the_flash_kernel(monkeypatch):
    """The CPU flash-attention kernel is slow in bf16, so teacher-forced attention runs as plain
    bf16 products around an fp32 softmax there; the result matches fp32 closely. Long sequences
    and fp32 models get the fused kernel (in fp32)."""
    import torch.nn.functional as F

    from nmt.models.attention import MultiHeadAttention

    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F,
        "scaled_dot_product_attention",
        lambda q, *a, **k: calls.append(q.dtype) or real(q, *a, **k),
    )
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, 0.0)
    x = torch.randn(2, 5, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mha(x, x, causal=True)
    assert calls == [] and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), mha(x, x, causal=True), atol=0.05, rtol=0.05)
    assert calls == [torch.float32]  # fp32: the fused kernel
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert mha(x, torch.randn(2, 200, 16)).dtype == torch.bfloat16
    assert calls == [torch.float32] * 2  # 200 keys: the fused kernel, in fp32


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L", [6, 130])  # plain ops; past PLAIN_MAX_POSITIONS, fp32 flash
def test_low_precision_attention_equals_fp32_attention_values_and_gradients(causal, L):
    """Padding (a key mask per sentence) and causal masks, bf16 inputs: values and gradients
    within bf16 rounding of torch's fp32 attention; masked keys get exactly no weight."""
    import torch.nn.functional as F

    from nmt.models.attention import PLAIN_MAX_POSITIONS, low_precision_attention

    assert 6 <= PLAIN_MAX_POSITIONS < 130
    torch.manual_seed(0)
    B, H, d = 3, 2, 8
    q, k, v = (torch.randn(B, H, L, d) for _ in range(3))
    mask = None if causal else (torch.arange(L)[None] < torch.tensor([L, 2, 4])[:, None])
    mask = None if mask is None else mask[:, None, None, :]
    ins = [t.bfloat16().requires_grad_() for t in (q, k, v)]
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = low_precision_attention(*ins, mask, causal, 0.0)
    ref = F.scaled_dot_product_attention(*refs, attn_mask=mask, is_causal=causal)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=0.03, rtol=0.03)
    g = torch.randn_like(ref)
    out.backward(g.bfloat16())
    ref.backward(g)
    for mine, theirs in zip(ins, refs):
        torch.testing.assert_close(mine.grad.float(), theirs.grad, atol=0.06, rtol=0.06)
    if not causal:  # keys past a sentence's length: no gradient, so no influence
        assert (ins[1].grad[1, :, 2:] == 0).all() and (ins[2].grad[2, :, 4:] == 0).all()


def test_auto_picks_bf16_only_where_it_runs_faster(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert precision.resolve_precision("auto", CPU) == "fp32"
    assert precision.resolve_precision("bf16", CPU) == "bf16"  # explicit: kept (with a warning)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))
    assert precision.resolve_precision("auto", CPU) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert precision.resolve_precision("auto", torch.device("cuda")) == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert precision.resolve_precision("auto", torch.device("cuda")) == "bf16"


def test_bf16_on_a_gpu_without_bf16_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla V100-SXM2-16GB")
    with pytest.raises(
        NmtError,
        match=r"'train.precision: bf16' is not supported by this GPU "
        r"\(Tesla V100-SXM2-16GB\); use fp16 or fp32",
    ):
        precision.autocast_for("bf16", torch.device("cuda"))


def test_fp16_on_cpu_is_a_one_line_error():
    with pytest.raises(NmtError, match="'train.precision: fp16' needs a CUDA device"):
        precision.autocast_for("fp16", CPU)


def test_decoding_runs_fp32_on_a_cpu_and_the_run_precision_on_a_gpu(monkeypatch):
    """CPU decoding is fp32 whatever the run trained in (bf16 rounding depends on the batch's
    shape, so output would depend on batching); a GPU decodes in the run's precision."""
    for flags in ({"avx2"}, {"avx512_bf16"}, {"amx_bf16"}):
        monkeypatch.setattr(precision, "cpu_flags", lambda flags=flags: frozenset(flags))
        assert {precision.decode_precision(p, CPU) for p in ("auto", "fp32", "bf16", "fp16")} == {
            "fp32"
        }
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = torch.device("cuda")
    assert [precision.decode_precision(p, gpu) for p in ("auto", "fp32", "bf16", "fp16")] == [
        "bf16",
        "fp32",
        "bf16",
        "fp16",
    ]
    assert precision.decode_precision("bf16", gpu, int8=True) == "fp32"


def test_int8_models_decode_in_fp32_even_where_the_run_trained_in_bf16(
    monkeypatch, tiny_transformer_run
):
    """int8's quantized linear layers take fp32 activations: a bf16 run on a bf16 CPU decoded
    with --int8 (CLI or API) must not hand them bf16 ones."""
    from nmt import Translator

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert precision.decode_precision("bf16", CPU, int8=True) == "fp32"
    # on the CPU, where int8 runs (with a GPU visible, the default device would be the GPU)
    assert Translator.load(tiny_transformer_run, device="cpu").precision == (
        precision.decode_precision("auto", CPU)
    )
    t = Translator.load(tiny_transformer_run, device="cpu", int8=True)
    assert t.precision == "fp32"
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as if a caller left autocast on
        assert t.translate(["a b c"], beam=2)[0].text is not None
    with pytest.raises(NmtError, match="int8 decodes in fp32"):
        Translator.load(tiny_transformer_run, int8=True, precision="bf16")


def test_dropout_is_torch_dropout_off_the_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(
        dropout_mod.F, "dropout", lambda x, p, training: calls.append((x.device.type, p)) or x
    )
    x = torch.empty(4, 8, device="meta")  # stands in for a CUDA tensor
    dropout_mod.byte_dropout(x, 0.3)
    dropout_mod.byte_dropout(torch.ones(4, 8), 0.3)  # CPU: the byte-mask kernel
    assert calls == [("meta", 0.3)]


def test_tf32_switch_sets_cuda_matmul_and_cudnn():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        precision.set_tf32(True)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        precision.set_tf32(False)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_cpu_flags_come_from_proc_cpuinfo():
    flags = precision.cpu_flags()
    assert isinstance(flags, frozenset)
    assert precision.cpu_has_bf16() == bool(flags & {"avx512_bf16", "amx_bf16"})


def test_tf32_is_on_by_default():
    from nmt.config import TrainConfig

    assert TrainConfig().tf32 is True and TrainConfig().precision == "auto"


def test_decoding_device_is_the_training_device_and_cuda_without_cuda_is_one_line(monkeypatch):
    from conftest import make_config
    from nmt.inference import decoding_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    trained_on_gpu = make_config(train={"device": "cuda"})
    assert decoding_device(None, trained_on_gpu) == CPU  # this machine has no GPU
    with pytest.raises(
        NmtError,
        match=r"--device cuda: no CUDA device is available \(use "
        r"--device cpu\)",
    ):
        decoding_device("cuda", trained_on_gpu)
    with pytest.raises(NmtError, match="--device: expected cpu, cuda or cuda:N, got 'gpu'"):
        decoding_device("gpu", trained_on_gpu)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert decoding_device(None, trained_on_gpu).type == "cuda"
    trained_on_cpu = make_config(train={"device": "cpu"})
    assert decoding_device(None, trained_on_cpu) == CPU
