"""What a new user broke on a fresh clone, each kept fixed: a hand-made averaged.pt never becomes
a run's model unasked; every number in a config, flag or request is finite and in its type's
range, refused in one line (or a 4xx) before work; an unparsable request body is a 400, never a
500; an output that comes out empty for a reason says the reason."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import make_config
from nmt.cli import main
from nmt.run_dir import RunDir
from nmt.training.log import Pace
from nmt.training.stopping import stop_decision

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "configs" / "toy" / "rnnsearch.yaml"


def error_of(capsys, *argv) -> str:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # a flag argparse refuses
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("nmt: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def run_copy(tiny_transformer_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))


# ------------------------------------------------------------------ 1. a stray averaged.pt


def test_an_averaged_pt_written_by_hand_is_not_the_runs_model(run_copy, caplog, capsys):
    steps = sorted((run_copy / "checkpoints").glob("step_*.pt"))
    out = run_copy / "averaged.pt"
    assert main(["average", *map(str, steps[-2:]), "-o", str(out)]) == 0
    with caplog.at_level(logging.WARNING, logger="nmt"):
        assert RunDir(run_copy).checkpoint() == run_copy / "best.pt"
    said = [r.getMessage() for r in caplog.records if "averaged.pt" in r.getMessage()]
    assert len(said) == 1 and "train.average_last is 0" in said[0] and "best.pt" in said[0]
    capsys.readouterr()
    assert (
        main(["evaluate", str(run_copy), "--split", "test", "--beam", "1", "--bootstrap", "0"]) == 0
    )
    scores = json.loads((run_copy / "eval_test_beam1" / "scores.json").read_text())
    assert Path(scores["checkpoint"]).name == "best.pt"
    assert main(["evaluate", str(out), "--split", "test", "--beam", "1", "--bootstrap", "0"]) == 0
    assert (run_copy / "eval_test_beam1_averaged" / "scores.json").is_file()  # named: used


def test_a_run_that_averages_by_config_is_still_its_average(run_copy):
    cfg = yaml.safe_load((run_copy / "config.yaml").read_text())
    cfg["train"]["average_last"] = 2
    (run_copy / "config.yaml").write_text(yaml.safe_dump(cfg))
    shutil.copy(run_copy / "best.pt", run_copy / "averaged.pt")
    assert RunDir(run_copy).checkpoint() == run_copy / "averaged.pt"


# ------------------------------------------------------------------ 3. numbers in a config


@pytest.mark.parametrize(
    "override, says",
    [
        ("model.dropout=nan", "'model.dropout'"),
        ("train.lr=inf", "'train.lr'"),
        ("train.lr=-inf", "'train.lr'"),
        ("train.lr=1e400", "'train.lr'"),
        ("train.seed=99999999999999999999999999", "'train.seed'"),
        ("train.seed=-1", "'train.seed'"),
        ("train.max_steps=99999999999999999999", "'train.max_steps'"),
        ("data.shapes=1000", "'data.shapes'"),
        ("decode.seed=4294967296", "'decode.seed'"),
    ],
)
def test_a_number_out_of_its_range_is_one_line_before_anything_is_written(
    tmp_path, capsys, override, says
):
    run = tmp_path / "run"
    line = error_of(capsys, "train", TOY, "--set", override, "--set", f"train.run_dir={run}")
    assert says in line and "out of range" in line
    assert not run.exists()


def test_a_repeated_yaml_key_is_refused_with_both_lines(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text(
        "data:\n  source: synthetic\nmodel:\n  arch: rnnsearch\n  dropout: 0.1\n  dropout: 0.3\n"
    )
    line = error_of(capsys, "train", path, "--dry-run")
    assert "duplicate key 'dropout'" in line and "line 5" in line and "line 6" in line


def test_yaml_merge_keys_still_merge_and_an_own_key_overrides_a_merged_one(tmp_path):
    from nmt.config.yaml_file import read_yaml

    path = tmp_path / "anchors.yaml"
    path.write_text("base: &b {x: 1, y: 1}\nc:\n  <<: *b\n  x: 2\n")
    assert read_yaml(path) == {"base": {"x": 1, "y": 1}, "c": {"x": 2, "y": 1}}


def test_an_unhashable_yaml_key_is_one_line(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text("data:\n  ? [a, b]\n  : 1\n")
    assert "unhashable key" in error_of(capsys, "train", path, "--dry-run")


def test_the_key_checking_loader_is_yamls_safe_one(tmp_path, capsys):
    from nmt.config.yaml_file import _UniqueKeyLoader

    assert issubclass(_UniqueKeyLoader, yaml.SafeLoader)
    path = tmp_path / "cfg.yaml"
    path.write_text("data: !!python/object/apply:os.system ['true']\n")
    assert "YAML tag not allowed" in error_of(capsys, "train", path, "--dry-run")


def test_a_diverged_fp32_run_is_not_told_to_use_fp32():
    cfg = make_config(train={"max_bad_steps": 2})
    fp32 = stop_decision(cfg, step=3, bad_run=("nan", 2), precision="fp32")
    bf16 = stop_decision(cfg, step=3, bad_run=("nan", 2), precision="bf16")
    assert "lower 'train.lr'" in fp32.reason and "fp32" not in fp32.reason
    assert "'train.precision: fp32' (not bf16)" in bf16.reason


# ------------------------------------------------------------------ 2, 6. flags


def test_a_sampling_seed_past_its_range_is_a_flag_error(tiny_transformer_run, capsys):
    line = error_of(capsys, "translate", tiny_transformer_run, "--sample", "--seed", "9" * 26)
    assert "--seed" in line and "4294967295" in line and len(line) < 200


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_port_outside_0_to_65535_is_refused(tiny_transformer_run, capsys, port):
    line = error_of(capsys, "serve", tiny_transformer_run, "--port", port)
    assert "--port" in line


# ------------------------------------------------------------------ 2, 11. the server


@pytest.fixture(scope="module")
def client(tiny_transformer_run):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.api import Translator
    from nmt.serve.app import Limits, create_app

    with TestClient(create_app(Translator.load(tiny_transformer_run), Limits())) as c:
        yield c


@pytest.mark.parametrize(
    "body, status, says",
    [
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
        (b'{"text": ["a"], "temperature": NaN}', 400, "NaN is not a JSON number"),
        (b'{"text": ["a"], "top_p": Infinity}', 400, "Infinity is not a JSON number"),
        (b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}", 400, "invalid JSON"),
    ],
)
def test_an_unparsable_body_is_a_400_never_a_500(client, body, status, says):
    r = client.post("/v1/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status and says in r.json()["error"]


def test_a_sampling_seed_past_its_range_is_a_422(client):
    body = {"text": ["a b"], "sample": True, "seed": 99999999999999999999999999}
    r = client.post("/v1/translate", json=body)
    assert r.status_code == 422 and r.json()["error"].startswith("seed:")


@pytest.mark.parametrize(
    "body, field",
    [
        (b'{"text": ["a"], "sample": true, "temperature": 1e999}', "temperature"),
        (b'{"text": ["a"], "top_k": 99999999999999999999999}', "top_k"),
        (b'{"text": ["a"], "attention_head": 99999999999999999999999}', "attention_head"),
        (b'{"text": ["a"], "nbest": 100000000000000000000}', "nbest"),
    ],
)
def test_a_request_number_past_its_range_is_a_422_naming_it(client, body, field):
    r = client.post("/v1/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and field in r.json()["error"]


def test_a_huge_unknown_field_is_not_echoed_back_whole(client):
    r = client.post("/v1/translate", json={"text": ["a"], "x" * 100_000: 1})
    assert r.status_code == 422 and len(r.json()["error"]) < 300


# ------------------------------------------------------------------ 4, 7. empty for a reason


def test_an_empty_local_training_corpus_is_one_line(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for split, text in (("train", ""), ("valid", "a\n"), ("test", "a\n")):
        for side in ("src", "tgt"):
            (data / f"{split}.{side}").write_text(text)
    line = error_of(
        capsys,
        "train",
        TOY,
        "--set",
        "data.source=local",
        "--set",
        f"data.path={data}",
        "--set",
        f"train.run_dir={tmp_path / 'run'}",
    )
    assert "training split is empty" in line and str(data / "train.src") in line


def test_a_language_vocab_that_masks_every_piece_says_so(tiny_transformer_run, capsys):
    line = error_of(capsys, "translate", tiny_transformer_run, "--language-vocab", "1000000")
    assert "leaves no piece to write" in line and "use at most" in line


# ------------------------------------------------------------------ 8. the loss figure


def test_the_loss_figure_says_why_its_right_panel_is_empty():
    from nmt.scoring.length_figures import loss_figure

    group = {"nll": 2.0, "nll_ci": [1.9, 2.1]}
    record = {
        "buckets": [
            {"lo": 1, "hi": 10, "n": 5, **group},
            {"lo": 11, "hi": None, "n": 0, "nll": None},
        ],
        "positions": {"lo": 51, "hi": None, "n": 0, "tenths": [dict(group)] * 10},
    }
    fig = loss_figure({"m": record})
    right = fig.axes[1]
    assert not right.axison and "no sentence of 51+-word sources" in right.texts[0].get_text()


# ------------------------------------------------------------------ 10. compile and pipes


def test_the_step_time_leaves_out_the_time_spent_compiling(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("nmt.training.log.time.time", lambda: now[0])
    pace = Pace(step=0, compiled=0.0)
    now[0] += 130.0  # 10 steps of 1 s after 120 s compiling
    per, left = pace.eta(10, 100, compiled=120.0)
    assert per == pytest.approx(1.0) and left == pytest.approx(90.0)


def test_train_piped_into_head_finishes_saves_and_exits_0(tmp_path):
    run = tmp_path / "run"
    cmd = (
        f"{sys.executable} -m nmt train {TOY} --set train.max_steps=2 "
        f"--set train.valid_every=1000 --set train.run_dir={run} 2>&1 | head -1 >/dev/null; "
        "echo ${PIPESTATUS[0]}"
    )
    out = subprocess.run(["bash", "-c", cmd], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "0", out.stderr
    assert (run / "best.pt").is_file()
