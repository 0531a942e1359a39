"""Time to quality: `nmt curves` draws validation BLEU against training minutes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmt.cli import main
from nmt.scoring.curves import read_curve

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_run(path: Path, rows: list[dict]) -> Path:
    path.mkdir(parents=True)
    train = [{"step": r["step"], "split": "train", "loss": 3.0} for r in rows]
    lines = [json.dumps(r) for pair in zip(train, rows) for r in pair]
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_a_curve_is_the_valid_rows_in_training_minutes(tmp_path):
    run = fake_run(
        tmp_path / "fast",
        [
            {"step": 100, "split": "valid", "loss": 2.0, "bleu": 10.0, "seconds": 60.0},
            {"step": 200, "split": "valid", "loss": 1.5, "bleu": 20.0, "seconds": 150.0},
        ],
    )
    curve = read_curve(run)
    assert (curve.steps, curve.minutes, curve.values) == ([100, 200], [1.0, 2.5], [10.0, 20.0])
    assert read_curve(run, "loss").values == [2.0, 1.5]


def test_nmt_curves_plots_and_tables_each_runs_best_and_when(tmp_path, capsys):
    a = fake_run(
        tmp_path / "a",
        [
            {"step": 100, "split": "valid", "loss": 2.0, "bleu": 10.0, "seconds": 60.0},
            {"step": 200, "split": "valid", "loss": 1.5, "bleu": 25.0, "seconds": 120.0},
            {"step": 300, "split": "valid", "loss": 1.4, "bleu": 24.0, "seconds": 180.0},
        ],
    )
    b = fake_run(
        tmp_path / "b", [{"step": 50, "split": "valid", "loss": 2.5, "bleu": 5.0, "seconds": 600}]
    )
    out = tmp_path / "out"
    assert main(["curves", str(a), str(b), "--names", "rnn,tr", "--out", str(out)]) == 0
    assert (out / "curves.png").read_bytes()[:8] == PNG_MAGIC
    table = (out / "curves.md").read_text()
    assert "| rnn | 3 | 25.00 | 200 | 2.0 | 300 | 3.0 |" in table
    assert "| tr | 1 | 5.00 | 50 | 10.0 | 50 | 10.0 |" in table
    assert table in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no metrics file"),
        ('{"step": 1, "split": "valid", "bleu": 3.0}\n', "no validation row with 'bleu' and"),
        ('{"step": 1, "split": "valid"\n', "line 1: not a JSON object"),
    ],
)
def test_a_run_without_timed_validation_rows_is_one_line(tmp_path, capsys, content, message):
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "metrics.jsonl").write_text(content)
    assert main(["curves", str(run), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_trained_run_has_training_seconds_on_every_validation_row(tiny_transformer_run):
    rows = [
        json.loads(x) for x in (tiny_transformer_run / "metrics.jsonl").read_text().splitlines()
    ]
    valid = [r for r in rows if r["split"] == "valid"]
    assert valid and all(r["seconds"] > 0 for r in valid)
    assert read_curve(tiny_transformer_run).steps == [r["step"] for r in valid]
