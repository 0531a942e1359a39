"""Word dropout: training source pieces replaced by <unk>, never EOS, padding or the target."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nmt.checkpoint import load_checkpoint, step_checkpoints
from nmt.config.load import load_config
from nmt.data.batching import make_batch
from nmt.data.tokenizer import EOS, PAD, UNK
from nmt.data.word_dropout import drop_source_words
from nmt.errors import NmtError
from nmt.jobs import train as train_job


def _batch():
    src = [[5 + (i + j) % 40 for j in range(3 + i % 30)] + [EOS] for i in range(200)]
    tgt = [[7 + (i * j) % 40 for j in range(2 + i % 9)] for i in range(200)]
    return make_batch(src, tgt)


def test_only_real_source_pieces_become_unk_at_about_the_rate():
    batch = _batch()
    torch.manual_seed(0)
    out = drop_source_words(batch, 0.25)
    changed = out.src != batch.src
    assert (out.src[changed] == UNK).all()
    assert not changed[~batch.src_mask].any() and (out.src[~batch.src_mask] == PAD).all()
    assert ((out.src == EOS) == (batch.src == EOS)).all()  # every sentence keeps its end
    real = batch.src_mask & (batch.src != EOS)
    assert abs(changed.sum().item() / real.sum().item() - 0.25) < 0.02
    assert torch.equal(out.tgt_in, batch.tgt_in) and torch.equal(out.tgt_out, batch.tgt_out)
    assert torch.equal(out.src_mask, batch.src_mask) and out.n_tokens == batch.n_tokens


def test_zero_word_dropout_leaves_the_batch_and_the_random_stream_alone():
    batch = _batch()
    state = torch.get_rng_state()
    assert drop_source_words(batch, 0.0) is batch
    assert torch.equal(torch.get_rng_state(), state)


def test_word_dropout_changes_training_and_resumes_exactly(tiny_yaml):
    def config(name: str, **train) -> Path:
        return tiny_yaml("transformer", f"{name}/config.yaml", train=train)

    plain = train_job.train(load_config(config("p", max_steps=16))).run
    full = config("a", max_steps=16, word_dropout=0.3)
    run_a = train_job.train(load_config(full)).run
    part = config("b", max_steps=7, word_dropout=0.3)
    run_b = train_job.train(load_config(part)).run
    train_job.train(load_config(part, ["train.max_steps=16"]), resume=True)

    def params(run):
        return load_checkpoint(step_checkpoints(run)[-1])["model"]

    a, b, p = params(run_a), params(run_b), params(plain)
    assert all(torch.allclose(a[k], b[k], atol=1e-6, rtol=0) for k in a)
    assert any(not torch.allclose(a[k], p[k], atol=1e-4) for k in a)


def test_word_dropout_must_be_a_probability(tiny_yaml):
    with pytest.raises(NmtError, match="word_dropout"):
        load_config(tiny_yaml(train={"word_dropout": 1.0}))
