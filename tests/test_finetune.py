"""Fine-tuning (train.init_from): starts from the parent's weights and subwords, refuses a vocab
or model section that does not fit it, and resumes exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import tiny_config, write_yaml
from nmt.checkpoint import load_checkpoint, load_model, step_checkpoints
from nmt.cli import main
from nmt.config.load import load_config
from nmt.data.prepared import prepared_corpus
from nmt.jobs import train as train_job
from nmt.training.trainer import loss_fn

# The tiny Transformer (the sizes the errors below name) without dropout, trained in fp32 on any
# CPU: a test recomputes the loss of step 1 and expects the very same number.
MODEL = {"d_model": 32, "ff": 64, "dropout": 0.0, "tie_embeddings": True}
TRAIN = {"max_steps": 12, "log_every": 1, "precision": "fp32"}


def config(tmp: Path, **sections) -> Path:
    cfg = tiny_config(tmp, "transformer", vocab={"size": 200}, model=MODEL, **sections)
    return write_yaml(tmp / "c.yaml", cfg)


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    cfg = config(tmp_path_factory.mktemp("parent"), train=TRAIN)
    return train_job.train(load_config(cfg)).run


def child(tmp_path: Path, parent: Path, *overrides: str) -> tuple[Path, list[str]]:
    """A fine-tuning config on another corpus (a different synthetic seed)."""
    train = {**TRAIN, "run_dir": str(tmp_path / "child"), "init_from": str(parent)}
    return config(tmp_path, data={"synthetic": {"seed": 11}}, train=train), list(overrides)


def rows(run: Path) -> list[dict]:
    return [
        json.loads(x)
        for x in (run / "metrics.jsonl").read_text().splitlines()
        if json.loads(x)["split"] == "train"
    ]


def test_fine_tuning_starts_from_the_parents_weights_and_subwords(tmp_path, parent):
    cfg_path, sets = child(tmp_path, parent, "train.max_steps=1")
    cfg = load_config(cfg_path, sets)
    run = train_job.train(cfg).run
    assert (run / "spm.model").read_bytes() == (parent / "spm.model").read_bytes()
    # The loss of step 1 (before its update) is the parent model's loss on that batch.
    _, model, tok, _ = load_model(parent)
    batcher = prepared_corpus(cfg, tokenizer=tok).batcher(cfg.data, cfg.train.seed)
    b = batcher.batch(batcher.epoch(0)[0])
    with torch.no_grad():
        expected = (
            loss_fn(model(b.src, b.src_mask, b.tgt_in), b.tgt_out, cfg.train.label_smoothing).item()
            / b.n_tokens
        )
    assert rows(run)[0]["loss"] == pytest.approx(expected, rel=1e-5)
    assert load_checkpoint(run / "best.pt")["step"] == 1  # a new run: its own step count


def test_fresh_optimizer_unless_init_optimizer(tmp_path, parent):
    fresh = train_job.train(load_config(*child(tmp_path / "a", parent, "train.max_steps=1"))).run
    cont = train_job.train(
        load_config(
            *child(tmp_path / "b", parent, "train.max_steps=1", "train.init_optimizer=true")
        )
    ).run
    parent_opt = load_checkpoint(step_checkpoints(parent)[-1])["optimizer"]["state"]
    opt = {
        name: load_checkpoint(r / "best.pt")["optimizer"]["state"]
        for name, r in (("fresh", fresh), ("cont", cont))
    }
    assert opt["fresh"][0]["step"] == 1
    assert opt["cont"][0]["step"] == parent_opt[0]["step"] + 1


def test_fine_tuned_run_resumes_exactly(tmp_path, parent):
    full = train_job.train(load_config(*child(tmp_path / "a", parent, "train.max_steps=9"))).run
    cfg, sets = child(tmp_path / "b", parent, "train.max_steps=4")
    part = train_job.train(load_config(cfg, sets)).run
    train_job.train(load_config(cfg, ["train.max_steps=9"]), resume=True)
    a = load_checkpoint(step_checkpoints(full)[-1])["model"]
    b = load_checkpoint(step_checkpoints(part)[-1])["model"]
    assert load_checkpoint(step_checkpoints(part)[-1])["step"] == 9
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert [r["loss"] for r in rows(full)] == [r["loss"] for r in rows(part)]


def test_a_vocab_section_that_disagrees_is_an_error_naming_both(tmp_path, parent, capsys):
    cfg, _ = child(tmp_path, parent)
    code = main(["train", str(cfg), "--set", "vocab.size=150"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "'vocab.size' is 150 in this config but 200 in" in err and str(parent) in err
    assert not (tmp_path / "child").exists()


def test_a_model_that_would_not_load_names_the_parameter_and_both_shapes(tmp_path, parent, capsys):
    cfg, _ = child(tmp_path, parent)
    code = main(["train", str(cfg), "--set", "model.ff=48"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "parameter encoder.0.ff.0.weight has shape (48, 32)" in err and "(64, 32)" in err
    assert not (tmp_path / "child").exists()
