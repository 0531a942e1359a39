"""`nmt study` with multilingual models (data.directions): they train as any model, and the
study's table compares every model in one direction, `evaluate.direction`, scored with the
language tag each model was trained with. A study that cannot say which direction is one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import tiny_config, tiny_model, write_yaml
from nmt.checkpoint import load_model
from nmt.cli import main
from nmt.jobs.evaluate import EvalOptions
from nmt.text_translation import translate_texts
from test_multilingual import DIRECTIONS, write_three_way

TRANSFORMER = tiny_model("transformer", layers=1)
EVALUATES_DIRECTIONS = "direction" in {f.name for f in dataclasses.fields(EvalOptions)}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    sizes = {"train": 200, "valid": 10, "test": 20}
    return write_three_way(tmp_path_factory.mktemp("multi_study") / "corpus", sizes)


def write_study(path: Path, corpus: Path, models: dict, evaluate: dict, **data) -> Path:
    """A study of `models` on the three-way corpus in every direction (or as `data` says)."""
    base = tiny_config(
        arch=None,
        data={"source": "local", "path": str(corpus), "directions": DIRECTIONS, **data},
        vocab={"type": "unigram", "size": 120},
        train={"max_steps": 8},
        decode={"beam": 1, "max_len_a": 1.0, "max_len_b": 4},
    )
    return write_yaml(path, {"base": base, "models": models, "evaluate": evaluate})


def refused(path: Path, tmp_path: Path, capsys) -> str:
    """The one error line of a study refused before any training."""
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and not (tmp_path / "out").exists()
    return err


@pytest.mark.skipif(
    not EVALUATES_DIRECTIONS,
    reason="nmt.jobs.evaluate.EvalOptions has no 'direction' yet: evaluation cannot put a "
    "multilingual model's language tag in, so a study cannot score one direction",
)
@pytest.mark.parametrize("tag", ["source", "target"])
def test_a_study_trains_multilingual_models_and_compares_them_in_one_direction(
    corpus, tmp_path, tag
):
    models = {"small": {"model": TRANSFORMER}, "wide": {"model": {**TRANSFORMER, "ff": 128}}}
    evaluate = {"split": "test", "beam": 1, "direction": "b-c"}
    path = write_study(tmp_path / "study.yaml", corpus, models, evaluate, tag=tag)
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    results = json.loads((out / "study.json").read_text())
    assert list(results) == ["small", "wide"] and all(r["n"] == 20 for r in results.values())
    assert "(test, b-c, beam 1)" in (out / "study.md").read_text()
    srcs = (corpus / "test.b").read_text().splitlines()
    for name in models:
        report = out / name / "eval_test_beam1_b-c"  # as nmt evaluate --direction names it
        cfg, model, tok, _ = load_model(out / name)
        view = tok.for_direction("c", tag)  # the tag on the side the model was trained with
        prefixes = [""] * len(srcs) if tag == "target" else None
        want = translate_texts(model, view, srcs, cfg.decode, beam=1, prefixes=prefixes)
        assert (report / "hyps.txt").read_text().splitlines() == [t.text for t in want]


def test_a_multilingual_study_without_a_direction_is_one_line(corpus, tmp_path, capsys):
    path = write_study(
        tmp_path / "s.yaml", corpus, {"m": {"model": TRANSFORMER}}, {"split": "test"}
    )
    err = refused(path, tmp_path, capsys)
    assert "model 'm' in" in err and "translates several directions (a-b, b-a, c-b, b-c)" in err
    assert "set 'evaluate.direction', e.g. a-b" in err


@pytest.mark.parametrize(
    "direction, message",
    [
        ("a-d", "'evaluate.direction' in {path} is 'a-d', which model 'm' in {path} does not "
         "translate (its directions: a-b, b-a, c-b, b-c)"),
        ("a-a", "'evaluate.direction' in {path} must be one direction SRC-TGT that every model "
         "translates, e.g. de-en, got 'a-a'"),
        (["a-b"], "'evaluate.direction' in {path} must be one direction SRC-TGT"),
    ],
)  # fmt: skip
def test_a_wrong_evaluate_direction_is_one_line(corpus, tmp_path, capsys, direction, message):
    evaluate = {"split": "test", "direction": direction}
    path = write_study(tmp_path / "s.yaml", corpus, {"m": {"model": TRANSFORMER}}, evaluate)
    assert message.format(path=path) in refused(path, tmp_path, capsys)


def test_a_one_direction_model_must_translate_the_studys_direction(corpus, tmp_path, capsys):
    one = {"model": TRANSFORMER, "data": {"directions": [], "src_lang": "a", "tgt_lang": "b"}}
    models = {"multi": {"model": TRANSFORMER}, "one": one}
    path = write_study(tmp_path / "s.yaml", corpus, models, {"direction": "b-c"})
    err = refused(path, tmp_path, capsys)
    assert "is 'b-c', which model 'one' in" in err and "(its directions: a-b)" in err


@pytest.fixture(scope="module")
def opus_b(corpus, tmp_path_factory) -> Path:
    """An imported multilingual Marian model reading b, writing a or c (>>a<<, >>c<<)."""
    pytest.importorskip("transformers")
    from hf_models import marian_dir, synthetic_corpus

    root = tmp_path_factory.mktemp("opus_b")
    marian = marian_dir(
        root / "marian", synthetic_corpus(root / "corpus"), lang_codes=["a", "c"], source_lang="b"
    )
    assert main(["import", "hf", str(marian), "-o", str(root / "run")]) == 0
    return root / "run"


@pytest.mark.skipif(not EVALUATES_DIRECTIONS, reason="EvalOptions has no 'direction' yet")
def test_a_study_scores_an_imported_multilingual_model_in_its_direction(corpus, opus_b, tmp_path):
    models = {"trained": {"model": TRANSFORMER}, "opus": {"run": str(opus_b)}}
    evaluate = {"split": "test", "direction": "b-c"}
    # OPUS-MT models tag the source: the study's data says so, which the trained model follows
    data = {"directions": ["b-a", "b-c"], "tag": "source"}
    path = write_study(tmp_path / "s.yaml", corpus, models, evaluate, **data)
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 0
    cfg, model, tok, _ = load_model(opus_b)
    srcs = (corpus / "test.b").read_text().splitlines()
    decode = dataclasses.replace(cfg.decode, max_len_a=1.0, max_len_b=4)  # the study's
    want = translate_texts(model, tok.for_direction("c", "source"), srcs, decode, beam=1)
    hyps = tmp_path / "out" / "opus" / "eval_test_beam1_b-c" / "hyps.txt"
    assert hyps.read_text().splitlines() == [t.text for t in want]


def test_an_imported_multilingual_model_needs_study_data_with_its_directions(
    corpus, opus_b, tmp_path, capsys
):
    models = {"trained": {"model": TRANSFORMER}, "opus": {"run": str(opus_b)}}
    one = {"directions": [], "src_lang": "b", "tgt_lang": "c"}
    path = write_study(tmp_path / "s.yaml", corpus, models, {"direction": "b-c"}, **one)
    err = refused(path, tmp_path, capsys)
    assert f"model 'opus' in {path}: {opus_b} translates several directions" in err
    assert "'base.data', which must list directions with that tag" in err
