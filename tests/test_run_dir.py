"""RunDir: the one owner of a run's file names, and whether a run holds a given config."""

from __future__ import annotations

import pytest

from conftest import make_config
from nmt.config.load import dump_yaml
from nmt.data.tokenizer import subword_files
from nmt.errors import NmtError
from nmt.run_dir import RunDir


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_layout_names(tmp_path):
    run = RunDir(tmp_path / "run")
    root = tmp_path / "run"
    assert run.config == root / "config.yaml"
    assert run.checkpoints == root / "checkpoints"
    assert run.step_checkpoint(12) == root / "checkpoints" / "step_12.pt"
    assert (run.best, run.averaged) == (root / "best.pt", root / "averaged.pt")
    assert (run.metrics, run.log) == (root / "metrics.jsonl", root / "train.log")
    assert run.trained == root / "trained.json" and run.tensorboard == root / "tensorboard"
    assert run.report("test", 5) == root / "eval_test_beam5"
    assert run.report("file_x", 1, "_int8") == root / "eval_file_x_beam1_int8"
    assert subword_files(True) == ("spm.model",)
    assert subword_files(False) == ("spm.src.model", "spm.tgt.model")


def test_the_run_of_a_checkpoint(tmp_path):
    assert RunDir.of_checkpoint(tmp_path / "r" / "checkpoints" / "step_3.pt").path == tmp_path / "r"
    assert RunDir.of_checkpoint(tmp_path / "r" / "best.pt").path == tmp_path / "r"
    assert RunDir.of_checkpoint(tmp_path / "avg.pt").path == tmp_path


def test_step_checkpoints_sort_by_step_and_ignore_other_files(tmp_path):
    run = RunDir(tmp_path)
    for name in ("step_10.pt", "step_9.pt", "step_100.pt", "step_x.pt", ".step_5.pt.1.tmp"):
        touch(run.checkpoints / name)
    assert [p.name for p in run.step_checkpoints()] == ["step_9.pt", "step_10.pt", "step_100.pt"]
    run.prune(keep=2)
    assert [p.name for p in run.step_checkpoints()] == ["step_10.pt", "step_100.pt"]


def test_checkpoint_prefers_best_or_latest_and_falls_back(tmp_path):
    run = RunDir(tmp_path / "run")
    with pytest.raises(NmtError, match="no such checkpoint or run directory"):
        run.checkpoint()
    run.path.mkdir()
    with pytest.raises(NmtError, match="is not a run directory \\(it has no config.yaml\\)"):
        run.checkpoint()  # a folder nmt train never wrote
    touch(run.config)
    with pytest.raises(NmtError, match="has no checkpoint yet"):
        run.checkpoint()  # a run before its first checkpoint
    touch(run.best)
    assert run.checkpoint(prefer="latest") == run.best  # the only one there is
    touch(run.step_checkpoint(4))
    assert run.checkpoint() == run.best
    assert run.checkpoint(prefer="latest") == run.step_checkpoint(4)


def test_a_run_that_averaged_its_last_checkpoints_is_its_average(tmp_path):
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.config.write_text("train:\n  average_last: 2\n")  # its training writes averaged.pt
    touch(run.best)
    touch(run.step_checkpoint(4))
    touch(run.averaged)  # written by train.average_last when training ends
    assert run.checkpoint() == run.averaged
    assert run.checkpoint(prefer="latest") == run.step_checkpoint(4)


def test_same_config_compares_every_key_with_defaults_filled_in(tmp_path):
    cfg = make_config(train={"run_dir": str(tmp_path / "r")})
    run = RunDir(cfg.train.run_dir)
    assert not run.same_config(cfg) and run.saved_config() is None and run.is_empty()
    run.create(cfg)
    assert run.config.read_text(encoding="utf-8") == dump_yaml(cfg)
    assert run.same_config(cfg) and run.saved_config() == cfg
    assert not run.is_empty() and not run.holds_run()
    other = make_config(train={"run_dir": str(tmp_path / "r"), "lr": 0.01})
    assert not run.same_config(other)
    touch(run.step_checkpoint(1))
    assert run.holds_run()
    run.create(other, overwrite=True)  # emptied first
    assert run.same_config(other) and not run.holds_run()


def test_a_run_made_before_a_key_existed_or_on_other_threads_is_the_same_run(tmp_path):
    # a study rerun after nmt gained a key must resume its models, not wipe them (it did)
    cfg = make_config(train={"run_dir": str(tmp_path / "r")})
    run = RunDir(cfg.train.run_dir).create(cfg)
    older = run.config.read_text(encoding="utf-8").replace("  word_dropout: 0.0\n", "")
    assert older != run.config.read_text(encoding="utf-8")
    run.config.write_text(older, encoding="utf-8")
    assert run.same_config(cfg)
    elsewhere = make_config(train={"run_dir": str(tmp_path / "r"), "threads": 1, "progress": False})
    assert run.same_config(elsewhere)
    run.config.write_text(older.replace("  seed:", "  no_such_key: 1\n  seed:"), encoding="utf-8")
    assert not run.same_config(cfg)  # a key this nmt cannot read: another run, not an error


def test_trained_marker_records_why_training_ended(tmp_path):
    run = RunDir(tmp_path)
    assert run.trained_reason() is None
    run.mark_trained("reached max_steps=3")
    assert run.trained_reason() == "reached max_steps=3"


def test_reports_are_the_eval_directories_of_the_run(tmp_path):
    run = RunDir(tmp_path / "r")
    run.report("valid", 1).mkdir(parents=True)
    run.report("test", 5).mkdir()
    touch(run.path / "eval_notes.txt")
    assert [p.name for p in run.reports()] == ["eval_test_beam5", "eval_valid_beam1"]
    assert not RunDir.is_report_of_run(run.report("test", 5))  # no config.yaml beside it
    touch(run.config)
    assert RunDir.is_report_of_run(run.report("test", 5))


def test_a_run_stored_with_a_relative_path_is_the_same_run_as_its_absolute_path(
    tmp_path, monkeypatch
):
    # studies stored their working-directory paths as written; a rerun must not wipe those runs
    monkeypatch.chdir(tmp_path)
    relative = make_config(
        data={"source": "local", "path": "data/corpus"}, train={"run_dir": str(tmp_path / "r")}
    )
    run = RunDir(relative.train.run_dir).create(relative)
    absolute = make_config(
        data={"source": "local", "path": str(tmp_path / "data" / "corpus")},
        train={"run_dir": str(tmp_path / "r")},
    )
    assert run.same_config(absolute)
    elsewhere = make_config(
        data={"source": "local", "path": str(tmp_path / "other")},
        train={"run_dir": str(tmp_path / "r")},
    )
    assert not run.same_config(elsewhere)
