"""A study's model may name an existing run (`run: PATH`): ours, or an `nmt import hf` import,
scored beside the trained models on the same sentences, never trained or written into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hf_models import marian_dir, synthetic_corpus
from nmt.cli import main

SMALL = {"arch": "seq2seq", "emb_size": 32, "hidden_size": 64}
TRAIN = {"max_steps": 10, "lr": 0.003, "log_every": 5, "progress": False, "seed": 7, "threads": 1}


def base(corpus: Path) -> dict:
    return {
        "data": {
            "source": "local",
            "path": str(corpus),
            "src_lang": "src",
            "tgt_lang": "tgt",
            "batch_tokens": 400,
        },
        "vocab": {"type": "word", "size": 200},
        "train": TRAIN,
        "decode": {"beam": 1, "max_len_a": 1.2, "max_len_b": 5},
    }


def write_study(path: Path, corpus: Path, models: dict) -> Path:
    study = {"base": base(corpus), "models": models, "evaluate": {"split": "test", "beam": 1}}
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return synthetic_corpus(tmp_path_factory.mktemp("study_runs") / "corpus", train=200, test=30)


@pytest.fixture(scope="module")
def our_run(corpus) -> Path:
    """A transformer trained with nmt train on the same corpus, outside any study."""
    cfg = {
        **base(corpus),
        "model": {"arch": "transformer", "d_model": 32, "heads": 2, "ff": 64, "layers": 1},
    }
    cfg["train"] = {**TRAIN, "run_dir": str(corpus.parent / "ours")}
    path = corpus.parent / "ours.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["train", str(path)]) == 0
    return corpus.parent / "ours"


def files_of(run: Path) -> dict[str, int]:
    return {str(p.relative_to(run)): p.stat().st_mtime_ns for p in run.rglob("*")}


def test_a_study_scores_our_existing_run_beside_its_trained_model(corpus, our_run, tmp_path):
    before = files_of(our_run)
    models = {"seq2seq": {"model": SMALL}, "ours": {"run": str(our_run)}}
    path, out = write_study(tmp_path / "study.yaml", corpus, models), tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    results = json.loads((out / "study.json").read_text())
    assert list(results) == ["seq2seq", "ours"]
    ours = results["ours"]
    assert ours["n"] == results["seq2seq"]["n"] == 30
    assert ours["steps"] == 10 and ours["stop_reason"] == f"an existing run: {our_run}"
    scores = json.loads((out / "ours" / "eval_test_beam1" / "scores.json").read_text())
    assert scores["test_set"]["data"] == f"local:{corpus.resolve()}"
    assert scores["checkpoint"].startswith(str(our_run))
    md = (out / "study.md").read_text()
    assert (
        "| ours |" in md
        and f"Scored, not trained by this study: ours ({ours['stop_reason']})" in md
    )
    assert "ours beats seq2seq" in md or "between ours and seq2seq" in md  # the paired test ran
    assert not (out / "configs" / "ours.yaml").exists()  # nothing to train
    assert files_of(our_run) == before  # the run was read, never written


def test_a_study_scores_an_imported_marian_model(corpus, tmp_path):
    pytest.importorskip("transformers")
    imported = tmp_path / "opus"
    assert (
        main(["import", "hf", str(marian_dir(tmp_path / "marian", corpus)), "-o", str(imported)])
        == 0
    )
    models = {"seq2seq": {"model": SMALL}, "opus": {"run": str(imported)}}
    path, out = write_study(tmp_path / "study.yaml", corpus, models), tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    results = json.loads((out / "study.json").read_text())
    assert results["opus"]["n"] == 30 and results["opus"]["steps"] == 0
    assert results["opus"]["train_seconds"] is None
    assert "| opus |" in (out / "study.md").read_text()


@pytest.mark.parametrize(
    "model, message",
    [
        ({"run": "nowhere"}, "run: nowhere is not a run directory"),
        ({"run": "x", "model": SMALL}, "'run' names an existing run directory and stands alone"),
        ({"run": 3}, "'run' names an existing run directory and stands alone"),
    ],
)
def test_a_wrong_run_model_is_one_line_before_any_training(
    corpus, tmp_path, capsys, model, message
):
    path = write_study(tmp_path / "study.yaml", corpus, {"seq2seq": {"model": SMALL}, "x": model})
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "seq2seq").exists()


def test_a_retrained_run_is_scored_again(corpus, our_run, tmp_path):
    models = {"seq2seq": {"model": SMALL}, "ours": {"run": str(our_run)}}
    path, out = write_study(tmp_path / "study.yaml", corpus, models), tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    scores = out / "ours" / "eval_test_beam1" / "scores.json"
    stamp = json.loads(scores.read_text())
    stamp["step"] = 3  # as if the report were of an older checkpoint
    scores.write_text(json.dumps(stamp))
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert json.loads(scores.read_text())["step"] == 10


@pytest.mark.parametrize(
    "section, change, recorded",
    [
        ("decode", {"max_len_b": 2}, lambda s: s["decode"]["max_len_b"] == 2),
        ("decode", {"alpha": 0.0}, lambda s: s["decode"]["alpha"] == 0.0),
        ("eval", {"buckets": [5], "min_bucket": 1}, lambda s: len(s["buckets"]) == 2),
        ("data", {"max_len": 7}, lambda s: s["test_set"]["data"].startswith("local:")),
    ],
)
def test_a_run_is_scored_again_when_the_studys_decoding_data_or_scoring_changes(
    corpus, our_run, tmp_path, section, change, recorded
):
    # the scores were reused as long as the checkpoint and step were the same (issue 60)
    path, out = (
        write_study(tmp_path / "study.yaml", corpus, {"ours": {"run": str(our_run)}}),
        tmp_path / "out",
    )
    assert main(["study", str(path), "--out", str(out)]) == 0
    scores = out / "ours" / "eval_test_beam1" / "scores.json"
    first = scores.stat().st_mtime_ns
    assert main(["study", str(path), "--out", str(out)]) == 0  # nothing changed: kept
    assert scores.stat().st_mtime_ns == first
    study = yaml.safe_load(path.read_text())
    study["base"].setdefault(section, {}).update(change)
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert scores.stat().st_mtime_ns != first and recorded(json.loads(scores.read_text()))
