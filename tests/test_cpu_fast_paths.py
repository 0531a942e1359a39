"""The RNNs' CPU fast paths compute what the textbook forms compute: the encoder run over padded
rows equals torch's packed run, and Bahdanau's score through the sigmoid equals v^T tanh(k + q),
values and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import nmt.models.rnn as rnn_mod
from nmt.models.attention import AdditiveAttention, _SigmoidScore


def _packed_run(rnn, x, lengths):
    out, h_n = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, (h_n[0] if isinstance(h_n, tuple) else h_n)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_padded_encoder_run_equals_the_packed_one(rnn_type, layers, bidirectional):
    torch.manual_seed(0)
    rnn = rnn_mod.make_rnn(rnn_type, 8, 16, layers, 0.0, bidirectional=bidirectional)
    x = torch.randn(4, 7, 8, requires_grad=True)
    lengths = torch.tensor([7, 3, 5, 1])
    mask = torch.arange(7)[None] < lengths[:, None]
    x_pads = x.detach().clone()
    x_pads[~mask] = 1e3  # whatever the pads hold, no real position may see it

    out, h_n = rnn_mod.run_masked(rnn, torch.where(mask[..., None], x, x_pads), mask)
    ref_out, ref_h = _packed_run(rnn, x, lengths)

    assert out.shape == ref_out.shape and h_n.shape == ref_h.shape
    assert (out[~mask] == 0).all()
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(h_n, ref_h, atol=1e-6, rtol=1e-5)
    g_out, g_h = torch.randn_like(out), torch.randn_like(h_n)
    params = [x, *rnn.parameters()]
    grads = torch.autograd.grad((out * g_out).sum() + (h_n * g_h).sum(), params)
    ref = torch.autograd.grad((ref_out * g_out).sum() + (ref_h * g_h).sum(), params)
    for got, want in zip(grads, ref):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_an_all_pad_row_stays_finite():
    rnn = rnn_mod.make_rnn("gru", 8, 16, 1, 0.0, bidirectional=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out, h_n = rnn_mod.run_masked(rnn, torch.randn(2, 3, 8), mask)
    assert torch.isfinite(out).all() and torch.isfinite(h_n).all() and (out[1] == 0).all()


def test_the_sigmoid_score_has_the_analytic_gradient():
    torch.manual_seed(0)
    k2, q2 = torch.randn(3, 5, 4, dtype=torch.double), torch.randn(3, 4, dtype=torch.double)
    v = torch.randn(4, dtype=torch.double)
    inputs = tuple(t.requires_grad_() for t in (k2, q2, v))
    assert torch.autograd.gradcheck(_SigmoidScore.apply, inputs)


def test_bahdanau_scores_and_gradients_equal_the_tanh_form():
    torch.manual_seed(0)
    attn = AdditiveAttention(6, 8, 7)
    memory, query = torch.randn(3, 5, 8, requires_grad=True), torch.randn(3, 6, requires_grad=True)
    scores = attn.score(query, attn.keys(memory))
    textbook = attn.v(torch.tanh(attn.U(memory) + attn.W(query).unsqueeze(1))).squeeze(-1)
    torch.testing.assert_close(scores, textbook, atol=1e-6, rtol=1e-5)
    g, params = torch.randn_like(scores), [memory, query, *attn.parameters()]
    for got, want in zip(
        torch.autograd.grad(scores, params, g), torch.autograd.grad(textbook, params, g)
    ):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_bahdanau_scores_stay_fp32_under_bf16_autocast_and_train_the_fp32_weights():
    torch.manual_seed(0)
    attn = AdditiveAttention(6, 8, 7)
    memory, query = torch.randn(3, 5, 8), torch.randn(3, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = attn.score(query, attn.keys(memory))
    assert scores.dtype == torch.float32
    textbook = attn.v(torch.tanh(attn.U(memory) + attn.W(query).unsqueeze(1))).squeeze(-1)
    torch.testing.assert_close(scores, textbook, atol=0.05, rtol=0.05)  # bf16 projections
    scores.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in attn.parameters())
