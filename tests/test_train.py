"""Training: loss falls for every architecture, resume is exact, signals save, limits stop cleanly."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import TINY_MODELS, tiny_config, write_yaml
from nmt.checkpoint import load_checkpoint, step_checkpoints
from nmt.cli import main
from nmt.config.load import load_config
from nmt.errors import NmtError
from nmt.jobs import train as train_job
from nmt.training.checkpoints import Progress
from nmt.training.clock import TrainClock

ROOT = Path(__file__).resolve().parents[1]
# 400 pairs of up to 14 words: about 20 batches an epoch, and 40 validation sentences
CORPUS = {"synthetic": {"train": 400, "valid": 40, "test": 40, "max_words": 14, "seed": 3}}


def write_config(tmp_path: Path, arch: str = "transformer", **train) -> Path:
    """TMP/ARCH.yaml: the tiny `arch` (a Transformer with tied embeddings) on CORPUS."""
    model = {"tie_embeddings": True} if arch == "transformer" else {}
    cfg = tiny_config(tmp_path, arch, data=CORPUS, model=model, train=train)
    return write_yaml(tmp_path / f"{arch}.yaml", cfg)


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("arch", sorted(TINY_MODELS))
def test_loss_falls_for_every_architecture(tmp_path, arch):
    cfg = write_config(tmp_path, arch, max_steps=40, log_every=5)
    run = train_job.train(load_config(cfg)).run
    train_rows = [m for m in metrics(run) if m["split"] == "train"]
    assert len(train_rows) == 8
    assert train_rows[-1]["loss"] < 0.85 * train_rows[0]["loss"]
    valid = [m for m in metrics(run) if m["split"] == "valid"]
    assert valid and {"loss", "ppl", "bleu", "chrf"} <= set(valid[-1])
    # the run directory holds everything the DESIGN promises
    for name in ("config.yaml", "spm.model", "train.log", "metrics.jsonl", "best.pt"):
        assert (run / name).is_file(), name
    assert [p.name for p in step_checkpoints(run)] == ["step_40.pt"]


def _params(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def test_resume_continues_exactly_mid_epoch(tmp_path):
    # 400 pairs at 400 tokens per batch is ~20 batches per epoch: step 7 is mid-epoch.
    full = write_config(tmp_path / "a", "transformer", max_steps=16)
    run_a = train_job.train(load_config(full)).run

    part = write_config(tmp_path / "b", "transformer", max_steps=7)
    run_b = train_job.train(load_config(part)).run
    ck = load_checkpoint(step_checkpoints(run_b)[-1])
    assert ck["progress"]["epoch"] == 0 and 0 < ck["progress"]["batch_in_epoch"]
    train_job.train(load_config(part, ["train.max_steps=16"]), resume=True)

    a, b = _params(step_checkpoints(run_a)[-1]), _params(step_checkpoints(run_b)[-1])
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=0), k
    # the parameters moved between step 7 and 16, so the comparison is not vacuous
    assert any(not torch.equal(ck["model"][k], b[k]) for k in b)


def test_resume_refuses_changed_model(tmp_path):
    cfg = write_config(tmp_path, "transformer", max_steps=3)
    train_job.train(load_config(cfg))
    with pytest.raises(NmtError, match="'model' in the config differs"):
        train_job.train(load_config(cfg, ["model.d_model=64", "train.max_steps=6"]), resume=True)


def test_resume_refuses_settings_that_would_change_the_continued_run(tmp_path):
    cfg = write_config(tmp_path, "transformer", max_steps=3, precision="fp32", seed=7)
    train_job.train(load_config(cfg))
    # a new seed reorders the batches, so "continue at batch N" would repeat and skip data
    with pytest.raises(NmtError, match="'train.seed' is 8 but the run .* used 7"):
        train_job.train(load_config(cfg, ["train.seed=8", "train.max_steps=6"]), resume=True)
    for change in (
        "train.precision=bf16",
        "train.optimizer=adamw",
        "train.accum_steps=2",
        "train.schedule=noam",
        "train.early_stop_metric=loss",
    ):
        with pytest.raises(NmtError, match=f"'{change.split('=')[0]}'"):
            train_job.train(load_config(cfg, [change, "train.max_steps=6"]), resume=True)
    # limits and logging may change
    result = train_job.train(
        load_config(cfg, ["train.max_steps=5", "train.log_every=1"]), resume=True
    )
    assert load_checkpoint(step_checkpoints(result.run)[-1])["step"] == 5


def test_resume_accepts_auto_precision_where_it_means_the_run_precision(tmp_path, monkeypatch):
    import nmt.precision as precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))  # auto = fp32
    cfg = write_config(tmp_path, "transformer", max_steps=2, precision="fp32", device="cpu")
    train_job.train(load_config(cfg))  # a run from before `auto` was the default
    result = train_job.train(
        load_config(cfg, ["train.precision=auto", "train.max_steps=3"]), resume=True
    )
    assert load_checkpoint(step_checkpoints(result.run)[-1])["step"] == 3
    with pytest.raises(NmtError, match="'train.precision' is 'bf16'"):
        train_job.train(
            load_config(cfg, ["train.precision=bf16", "train.max_steps=4"]), resume=True
        )


def test_resume_of_a_finished_run_trains_no_extra_step(tmp_path):
    cfg = write_config(tmp_path, "transformer", max_steps=4)
    train_job.train(load_config(cfg))
    result = train_job.train(load_config(cfg), resume=True)
    assert result.stop_reason == "reached max_steps=4" and not result.interrupted
    assert [p.name for p in step_checkpoints(result.run)] == ["step_4.pt"]
    assert [m["step"] for m in metrics(result.run) if m["split"] == "valid"] == [4]


def test_resume_after_a_signal_validates_the_unvalidated_last_steps(tmp_path, monkeypatch):
    import nmt.training.trainer as train_mod

    real_step = train_mod.Trainer.train_step

    def ctrl_c_after_step_3(self, batches):
        out = real_step(self, batches)
        if self.p.step == 2:  # this is the 3rd step: p.step is incremented after train_step
            self.stops.signal = "SIGINT"
        return out

    cfg = write_config(tmp_path, "seq2seq", max_steps=10, valid_every=2)
    monkeypatch.setattr(train_mod.Trainer, "train_step", ctrl_c_after_step_3)
    first = train_job.train(load_config(cfg))
    assert first.interrupted and first.stop_reason == "interrupted by SIGINT"
    assert [m["step"] for m in metrics(first.run) if m["split"] == "valid"] == [2]
    monkeypatch.setattr(train_mod.Trainer, "train_step", real_step)
    # the budget is already spent: no step is trained, but step 3 still gets its validation
    again = train_job.train(load_config(cfg, ["train.max_steps=3"]), resume=True)
    assert not again.interrupted and again.stop_reason == "reached max_steps=3"
    assert [m["step"] for m in metrics(again.run) if m["split"] == "valid"] == [2, 3]
    assert load_checkpoint(again.run / "best.pt")["step"] in (2, 3)


def _sigterm_after_step(train_mod, at: int, monkeypatch) -> None:
    """The trainer gets SIGTERM during step `at` (or, for the step it resumes at, before its
    first step)."""
    real_step, real_train = train_mod.Trainer.train_step, train_mod.Trainer.train

    def step(self, batches):
        out = real_step(self, batches)
        if self.p.step + 1 == at:  # p.step counts this step once train_step returns
            self.stops.signal = "SIGTERM"
        return out

    def train(self):
        if self.p.step == at:
            self.stops.signal = "SIGTERM"
        return real_train(self)

    monkeypatch.setattr(train_mod.Trainer, "train_step", step)
    monkeypatch.setattr(train_mod.Trainer, "train", train)


@pytest.mark.parametrize(
    "signals",
    [
        [9],  # between checkpoints: the signal's checkpoint (a bookmark) is step 9
        [8],  # right after the step-8 checkpoint, which is not written over
        [9, 11],  # twice: the second bookmark replaces the first
        [9, 9],  # again before any step: the bookmark stays where it is
    ],
)
def test_an_interrupted_run_keeps_and_averages_what_an_unbroken_run_does(
    tmp_path, monkeypatch, signals
):
    import nmt.training.trainer as train_mod

    keep = ["train.keep_last=3", "train.average_last=3"]
    unbroken = train_job.train(
        load_config(write_config(tmp_path / "a", "seq2seq", max_steps=12, valid_every=2), keep)
    ).run
    cfg = write_config(tmp_path / "b", "seq2seq", max_steps=12, valid_every=2)
    for i, at in enumerate(signals):
        _sigterm_after_step(train_mod, at, monkeypatch)
        result = train_job.train(load_config(cfg, keep), resume=i > 0)
        monkeypatch.undo()
        assert result.interrupted
        # it resumes from step `at`; no checkpoint before it was pruned for its sake
        kept = list(range(2, at + 1, 2))[-3:] + ([at] if at % 2 else [])
        assert [p.name for p in step_checkpoints(result.run)] == [f"step_{s}.pt" for s in kept]
        assert load_checkpoint(step_checkpoints(result.run)[-1])["step"] == at
    run = train_job.train(load_config(cfg, keep), resume=True).run
    assert [p.name for p in step_checkpoints(run)] == [p.name for p in step_checkpoints(unbroken)]
    assert [p.name for p in step_checkpoints(run)] == ["step_8.pt", "step_10.pt", "step_12.pt"]
    a, b = _params(unbroken / "averaged.pt"), _params(run / "averaged.pt")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=0), k


def test_without_a_validation_split_best_is_the_latest_model(tmp_path):
    cfg = write_config(tmp_path, "seq2seq", max_steps=6, valid_every=2)
    run = train_job.train(load_config(cfg, ["data.splits={train: train}"])).run
    assert load_checkpoint(run / "best.pt")["step"] == 6
    assert not [m for m in metrics(run) if m["split"] == "valid"]


def test_early_stopping_after_patience_validations_without_improvement(tmp_path, monkeypatch):
    import nmt.training.trainer as train_mod

    scores = iter([20.0, 25.0, 24.0, 25.0])  # BLEU: better, better, worse, not better
    monkeypatch.setattr(
        train_mod.Trainer, "validate", lambda self: {"loss": 1.0, "ppl": 2.7, "bleu": next(scores)}
    )
    cfg = write_config(tmp_path, "seq2seq", max_steps=100, valid_every=2, patience=2)
    result = train_job.train(load_config(cfg))
    assert result.stop_reason == "early stopping: no improvement in 2 validations"
    assert not result.interrupted
    assert [m["step"] for m in metrics(result.run) if m["split"] == "valid"] == [2, 4, 6, 8]
    assert load_checkpoint(result.run / "best.pt")["step"] == 4  # the best validation


def test_a_run_that_stopped_early_stays_stopped_when_resumed(tmp_path, monkeypatch):
    import nmt.training.trainer as train_mod

    scores = iter([20.0, 25.0, 24.0, 25.0, 24.0, 26.0, 27.0])
    monkeypatch.setattr(
        train_mod.Trainer, "validate", lambda self: {"loss": 1.0, "ppl": 2.7, "bleu": next(scores)}
    )
    cfg = load_config(write_config(tmp_path, "seq2seq", max_steps=100, valid_every=2, patience=2))
    first = train_job.train(cfg)
    kept = [p.name for p in step_checkpoints(first.run)]
    resumed = train_job.train(cfg, resume=True)
    assert (
        resumed.stop_reason
        == first.stop_reason
        == "early stopping: no improvement in 2 validations"
    )
    assert not resumed.interrupted
    assert [
        p.name for p in step_checkpoints(resumed.run)
    ] == kept  # nothing trained, nothing pruned
    assert load_checkpoint(step_checkpoints(resumed.run)[-1])["step"] == 8
    assert [m["step"] for m in metrics(resumed.run) if m["split"] == "valid"] == [2, 4, 6, 8]


def test_patience_without_a_validation_split_is_a_config_error(tmp_path, capsys):
    cfg = write_config(tmp_path, "seq2seq", patience=2)
    assert main(["train", str(cfg), "--set", "data.splits={train: train}"]) == 2
    err = capsys.readouterr().err
    assert f"'train.patience' in {cfg} needs a validation split" in err
    assert not (tmp_path / "run").exists()
    # a stored run is never refused by a training-only check
    load_config(cfg, ["data.splits={train: train}"])


def test_existing_run_dir_is_not_overwritten_without_flag(tmp_path, capsys):
    cfg = write_config(tmp_path, "transformer", max_steps=2)
    assert main(["train", str(cfg)]) == 0
    assert main(["train", str(cfg), "--set", "train.lr=0.001"]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err
    assert main(["train", str(cfg), "--set", "train.lr=0.001", "--overwrite"]) == 0


def test_max_minutes_stops_cleanly_with_checkpoint(tmp_path):
    run = train_job.train(
        load_config(write_config(tmp_path, "seq2seq", max_steps=0, max_minutes=0.02))
    ).run
    ck = load_checkpoint(step_checkpoints(run)[-1])
    assert ck["step"] >= 1
    assert "reached max_minutes" in (run / "train.log").read_text()


@pytest.mark.parametrize(
    "arch", ["seq2seq", "seq2seq-lstm", "rnnsearch", "rnnsearch-lstm", "transformer"]
)
def test_bf16_autocast_trains_and_decodes_on_cpu_for_every_architecture(
    tmp_path, arch, monkeypatch
):
    import nmt.precision as precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))  # no bf16 units
    name, _, rnn = arch.partition("-")
    sets = [f"model.rnn_type={rnn}"] if rnn else []
    # device: cpu, so the log line holds on a machine with a GPU too
    cfg = write_config(
        tmp_path, name, max_steps=2, precision="bf16", device="cpu", valid_max_sentences=4
    )
    run = train_job.train(load_config(cfg, sets)).run
    log = (run / "train.log").read_text()
    assert (
        "precision: bf16 autocast on cpu (this CPU has no native bf16: expect it to be slow)" in log
    )
    rows = metrics(run)
    assert all(math.isfinite(r["loss"]) for r in rows)
    assert "bleu" in rows[-1]  # validation loss in bf16, then greedy decoding


def test_precision_auto_is_fp32_on_a_cpu_without_bf16_units(tmp_path, monkeypatch):
    import nmt.precision as precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    run = train_job.train(
        load_config(write_config(tmp_path / "a", "transformer", max_steps=1, device="cpu"))
    ).run
    assert "precision: auto: fp32 on cpu" in (run / "train.log").read_text()
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert precision.resolve_precision("auto", torch.device("cpu")) == "bf16"
    assert precision.resolve_precision("fp32", torch.device("cpu")) == "fp32"


def test_fp16_on_cpu_is_a_config_error(tmp_path, capsys):
    cfg = write_config(tmp_path, "transformer", precision="fp16", device="cpu")
    assert main(["train", str(cfg)]) == 2
    assert "fp16" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_non_finite_losses_are_skipped_then_stop_training(tmp_path, monkeypatch):
    import nmt.training.trainer as train_mod

    real = train_mod.loss_fn
    calls = {"n": 0}

    def sometimes_nan(*args):
        calls["n"] += 1
        loss = real(*args)
        return loss * float("nan") if calls["n"] in (3, 4) else loss

    monkeypatch.setattr(train_mod, "loss_fn", sometimes_nan)
    run = train_job.train(load_config(write_config(tmp_path / "x", "transformer", max_steps=6))).run
    log = (run / "train.log").read_text()
    assert "non-finite loss" in log and "2 in total" in log
    assert load_checkpoint(step_checkpoints(run)[-1])["step"] == 6

    monkeypatch.setattr(train_mod, "loss_fn", lambda logits, *a: logits.sum() * float("inf"))
    with pytest.raises(NmtError, match="5 consecutive steps with a non-finite loss"):
        train_job.train(load_config(write_config(tmp_path / "y", "transformer", max_steps=20)))


def _wait_for(path: Path, text: str, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in {path}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_checkpoint_and_resume_continues(tmp_path, sig):
    cfg = write_config(tmp_path, "seq2seq", max_steps=100000, log_every=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(tmp_path / "run" / "metrics.jsonl", '"step": 3,')
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig.value, err  # interrupted, not finished: 130 or 143
    assert "Traceback" not in err
    assert f"interrupted by {sig.name}" in err
    step = load_checkpoint(step_checkpoints(tmp_path / "run")[-1])["step"]
    assert step >= 3
    run = train_job.train(load_config(cfg, [f"train.max_steps={step + 2}"]), resume=True).run
    assert load_checkpoint(step_checkpoints(run)[-1])["step"] == step + 2


def test_two_process_gloo_training_then_single_process_evaluate(tmp_path):
    # device: cpu forces gloo, so the test runs the same with or without GPUs
    cfg = write_config(tmp_path, "transformer", max_steps=24, log_every=4, device="cpu")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_port=29533",
            "-m",
            "nmt",
            "train",
            str(cfg),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    rows = [m for m in metrics(run) if m["split"] == "train"]
    assert len(rows) == 6  # only rank 0 writes
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert "2 process(es)" in (run / "train.log").read_text()
    report = tmp_path / "report"
    assert (
        main(["evaluate", str(run), "--split", "valid", "--beam", "1", "--report", str(report)])
        == 0
    )
    assert json.loads((report / "scores.json").read_text())["n"] == 40
    # each rank had its own seed, and the checkpoint keeps each rank's generators ...
    rngs = load_checkpoint(step_checkpoints(run)[-1])["rng_ranks"]
    assert len(rngs) == 2 and not torch.equal(rngs[0]["torch"], rngs[1]["torch"])
    # ... yet resuming on fewer processes (one) continues
    resumed = train_job.train(load_config(cfg, ["train.max_steps=26"]), resume=True)
    assert load_checkpoint(step_checkpoints(resumed.run)[-1])["step"] == 26


def _torchrun_with_fault(tmp_path: Path, fault: str, port: int) -> subprocess.CompletedProcess:
    cfg = write_config(tmp_path, "transformer", max_steps=6, log_every=1, device="cpu")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NMT_TEST_FAULT": fault}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={port}",
            str(ROOT / "tests" / "ddp_fault_worker.py"),
            "train",
            str(cfg),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nan_on_one_rank_skips_the_step_on_both_without_hanging(tmp_path):
    proc = _torchrun_with_fault(tmp_path, "nan", 29534)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # rank 0 (the only writer of train.log) saw a finite loss, yet skipped the step with rank 1
    assert "non-finite loss at step 3: step skipped" in (tmp_path / "run" / "train.log").read_text()
    # both ranks skipped the same step, so the run still ends at step 6 after 7 batches
    assert load_checkpoint(step_checkpoints(tmp_path / "run")[-1])["step"] == 6
    assert [m["step"] for m in metrics(tmp_path / "run") if m["split"] == "train"] == list(
        range(1, 7)
    )


def test_signal_on_one_rank_stops_every_rank_the_same_way(tmp_path):
    proc = _torchrun_with_fault(tmp_path, "signal", 29535)
    assert proc.returncode != 0, proc.stderr[-3000:]  # interrupted: not a finished run
    log = (tmp_path / "run" / "train.log").read_text()
    assert "stopped at step 3: interrupted on another rank" in log
    assert [p.name for p in step_checkpoints(tmp_path / "run")] == ["step_3.pt"]
    assert not [m for m in metrics(tmp_path / "run") if m["split"] == "valid"]  # no validation


class FakeTime:
    """A clock that moves only when a step is trained (`per_step` seconds each) or when a test
    moves it: training time measured without measuring anything real."""

    def __init__(self, per_step: float) -> None:
        self.t, self.per_step = 1000.0, per_step

    def now(self) -> float:
        return self.t


def test_train_clock_adds_this_process_to_the_runs_total_and_counts_that():
    fake, progress = FakeTime(0), Progress(train_seconds=90.0)  # 90 s from earlier processes
    clock = TrainClock(now=fake.now)
    fake.t += 500  # before training starts (loading, or the gap after a kill): not training
    clock.start()
    fake.t += 30
    clock.tick(progress)
    assert progress.train_seconds == 120.0 and clock.run_minutes() == 2.0  # the whole run


def fake_minutes(monkeypatch) -> FakeTime:
    """Training on a fake clock: each step takes 20 s, and nothing else takes any time."""
    import nmt.training.trainer as train_mod

    fake, real_step = FakeTime(per_step=20.0), train_mod.Trainer.train_step

    def timed_step(self, batches):
        fake.t += fake.per_step
        return real_step(self, batches)

    monkeypatch.setattr(train_mod.Trainer, "train_step", timed_step)
    monkeypatch.setattr(train_mod, "TrainClock", lambda: TrainClock(now=fake.now))
    return fake


def test_max_minutes_counts_the_runs_time_across_resumes_and_valid_rows_carry_it(
    tmp_path, monkeypatch
):
    fake = fake_minutes(monkeypatch)
    cfg = write_config(tmp_path, "seq2seq", max_steps=0, max_minutes=1, valid_every=2)
    first = train_job.train(load_config(cfg))
    assert first.stop_reason == "reached max_minutes=1"  # 3 steps of 20 s
    fake.t += 3600  # an hour between the end of the first run and the resume: counts nowhere
    again = train_job.train(load_config(cfg), resume=True)
    # the run has had its minute: resumed, it stops at once instead of training a minute more
    assert again.stop_reason == "reached max_minutes=1"
    assert step_checkpoints(again.run)[-1].name == "step_3.pt"
    more = train_job.train(load_config(cfg, ["train.max_minutes=2"]), resume=True)
    assert more.stop_reason == "reached max_minutes=2"  # a larger cap: a minute more
    valid = [m for m in metrics(more.run) if m["split"] == "valid"]
    assert [(m["step"], m["seconds"]) for m in valid] == [(2, 40), (3, 60), (4, 80), (6, 120)]
    assert load_checkpoint(step_checkpoints(more.run)[-1])["progress"]["train_seconds"] == 120


def test_a_run_resumed_under_a_time_cap_ends_where_an_uninterrupted_one_does(tmp_path, monkeypatch):
    fake_minutes(monkeypatch)
    whole = write_config(tmp_path / "whole", "seq2seq", max_steps=0, max_minutes=2)
    assert train_job.train(load_config(whole)).stop_reason == "reached max_minutes=2"
    parts = write_config(tmp_path / "parts", "seq2seq", max_steps=0, max_minutes=2)
    stopped = train_job.train(load_config(parts, ["train.max_steps=2"]))  # stopped at 40 s
    assert stopped.stop_reason == "reached max_steps=2"
    resumed = train_job.train(load_config(parts), resume=True)
    assert resumed.stop_reason == "reached max_minutes=2"
    assert step_checkpoints(tmp_path / "whole" / "run")[-1].name == "step_6.pt"
    assert step_checkpoints(resumed.run)[-1].name == "step_6.pt"  # not 2 + 6
