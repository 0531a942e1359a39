"""The training loss fused with the vocabulary projection: the same loss and gradients as
cross-entropy over the model's logits, for every architecture, without keeping the logits."""

from __future__ import annotations

import pytest
import torch

import nmt.training.loss
from nmt.data.tokenizer import PAD
from nmt.training.loss import projected_cross_entropy, token_cross_entropy
from test_models import VARIANTS, V, build, decoder_input, sentences


def batch(lengths=(7, 3, 5)):
    src, mask = sentences(list(lengths))
    tgt_in = decoder_input(list(lengths))
    tgt_out = torch.where(tgt_in == 2, 5, tgt_in).roll(-1, dims=1)  # any targets, PAD kept
    tgt_out[tgt_in == PAD] = PAD
    return src, mask, tgt_in, tgt_out


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Several chunks per batch (V logits a row, 4 rows a chunk), so chunk edges are covered."""
    monkeypatch.setitem(nmt.training.loss.CHUNK_ELEMENTS, "cpu", 4 * V)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("name", VARIANTS)
def test_fused_loss_and_gradients_equal_cross_entropy_over_the_logits(name, smoothing):
    src, mask, tgt_in, tgt_out = batch()
    model = build(name).train()
    grads = []
    for fused in (False, True):
        torch.manual_seed(0)  # the same dropout masks
        model.zero_grad()
        out = model(src, mask, tgt_in, features=fused)
        if fused:
            loss = projected_cross_entropy(out, model.vocab_projection(), tgt_out, smoothing)
        else:
            loss = token_cross_entropy(out, tgt_out, smoothing)
        (loss * 3).backward()  # a loss scale reaches the stored gradients
        grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (plain, plain_g), (fused, fused_g) = grads
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-5)
    for a, b in zip(fused_g, plain_g):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_without_gradients_the_fused_loss_is_the_same_number():
    src, mask, tgt_in, tgt_out = batch()
    model = build("transformer-pre")
    with torch.no_grad():
        plain = token_cross_entropy(model(src, mask, tgt_in), tgt_out, 0.1)
        fused = projected_cross_entropy(
            model(src, mask, tgt_in, features=True), model.vocab_projection(), tgt_out, 0.1
        )
    torch.testing.assert_close(fused, plain)


def test_autograd_keeps_no_tensor_as_wide_as_the_vocabulary():
    src, mask, tgt_in, tgt_out = batch()
    model = build("transformer-tied-untied-output").train()
    saved = []

    def keep(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        h = model(src, mask, tgt_in, features=True)
        before = len(saved)
        projected_cross_entropy(h, model.vocab_projection(), tgt_out, 0.1).backward()
        fused = saved[before:]
        logits = model.vocab_projection()(model(src, mask, tgt_in, features=True))
        before = len(saved)
        token_cross_entropy(logits, tgt_out, 0.1).backward()
    # the plain loss saves [tokens, V] log-probabilities; the fused one its gradients, which
    # are only as wide as the features and the projection's weight
    assert any(shape[-1] == V for shape in saved[before:])
    assert fused and all(shape[-1] != V for shape in fused)


def test_bf16_autocast_gives_the_loss_of_bf16_logits():
    src, mask, tgt_in, tgt_out = batch()
    model = build("transformer-pre")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        plain = token_cross_entropy(model(src, mask, tgt_in), tgt_out, 0.0)
        fused = projected_cross_entropy(
            model(src, mask, tgt_in, features=True), model.vocab_projection(), tgt_out, 0.0
        )
    torch.testing.assert_close(fused, plain, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_bf16_autocast_gradients_match_autograd_over_bf16_logits(smoothing):
    """Features, weight and bias gradients under bf16 autocast, with padding and several chunks
    (the fused loss casts each chunk once where autocast casts it per matmul)."""
    torch.manual_seed(1)
    n, d = 23, 16
    proj = torch.nn.Linear(d, V)
    target = torch.randint(4, V, (n,))
    target[[2, 9, 22]] = PAD
    features = torch.randn(n, d)
    grads = []
    for fused in (False, True):
        feats = features.clone().requires_grad_()
        proj.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if fused:
                loss = projected_cross_entropy(feats, proj, target, smoothing)
            else:
                loss = token_cross_entropy(proj(feats), target, smoothing)
        loss.backward()
        grads.append([loss.detach(), feats.grad, proj.weight.grad.clone(), proj.bias.grad.clone()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-3)
