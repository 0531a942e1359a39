"""One metric table (`nmt/config/metrics.py`): a new metric is one new row, and evaluation's
scores, the printed report, comparisons, the config's choices, training's validation and early
stopping all follow it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import pytest
from sacrebleu.metrics import CHRF

from conftest import REPO
from nmt.config.metrics import METRICS, SACREBLEU, MetricRow, text_metrics
from nmt.scoring.compare import comparison_markdown, load_comparison, paired
from nmt.scoring.metrics import score_report, validation_row
from nmt.scoring.tables import format_scores

pytestmark = pytest.mark.usefixtures("one_thread")

# chrF++ (chrF with word bigrams): a sacreBLEU metric nmt does not ship, one row away
CHRF_PP = MetricRow("chrF++", True, SACREBLEU + "CHRF", {"word_order": 2})


@pytest.fixture
def chrf_pp(monkeypatch):
    monkeypatch.setitem(METRICS, "chrf_pp", CHRF_PP)


def test_a_new_row_is_scored_by_evaluate_and_shown_in_its_report_and_in_compare(
    chrf_pp, tiny_transformer_run, tmp_path
):
    from nmt.jobs.evaluate import EvalOptions, evaluate

    reports = []
    for beam in (1, 3):
        opts = EvalOptions(
            beam=beam,
            metrics=("bleu", "chrf_pp"),
            bootstrap=20,
            report_dir=str(tmp_path / f"beam{beam}"),
            progress=False,
        )
        scores, report = evaluate(str(tiny_transformer_run), opts)
        reports.append(report)
        hyps = (report / "hyps.txt").read_text(encoding="utf-8").split("\n")[:-1]
        refs = (report / "refs.txt").read_text(encoding="utf-8").split("\n")[:-1]
        assert scores["chrf_pp"] == pytest.approx(
            CHRF(word_order=2).corpus_score(hyps, [refs]).score
        )
        assert "nw:2" in scores["chrf_pp_signature"] and len(scores["chrf_pp_ci"]) == 2
        assert all("chrf_pp" in b for b in scores["buckets"])
        assert json.loads((report / "scores.json").read_text())["chrf_pp"] == scores["chrf_pp"]
        text = format_scores(scores)
        assert f"chrF++ = {scores['chrf_pp']:.2f} [" in text
        header = text.split("\n\n")[1].split("\n")[0].strip("|").split("|")
        assert [c.strip() for c in header][-2:] == ["BLEU", "chrF++"]  # the report's columns
    comp = load_comparison([str(r) for r in reports], ["greedy", "beam"])
    paired(comp, n_samples=20)
    assert set(comp.tests["beam"]["p"]) == {"bleu", "chrf_pp"}
    assert "## chrF++ by source length" in comparison_markdown(comp)


def test_validation_scores_every_validation_row_of_the_table(monkeypatch):
    hyps = ["the cat sat on the mat", "a dog barks"]
    refs = ["the cat sat on a mat", "the dog barks"]
    both = {"de-en": (hyps, refs), "en-de": (refs, refs)}
    assert set(validation_row(both)) == {"bleu", "chrf"}
    monkeypatch.setitem(METRICS, "ter", dataclasses.replace(METRICS["ter"], validation=True))
    row = validation_row(both, per_direction=True)
    one = score_report(["x", "y"], hyps, refs, metrics=("ter",))["ter"]
    assert row["ter_de-en"] == pytest.approx(one) and row["ter_en-de"] == 0.0
    assert row["ter"] == pytest.approx(one / 2)  # the mean over the directions


def test_early_stopping_follows_the_tables_direction_of_its_metric(tmp_path, monkeypatch):
    """TER made a validation metric: lower is better, so best.pt is the lowest TER."""
    import nmt.training.trainer as train_mod
    from nmt.checkpoint import load_checkpoint
    from nmt.config.load import load_config
    from nmt.jobs import train as train_job
    from test_train import metrics, write_config

    monkeypatch.setitem(METRICS, "ter", dataclasses.replace(METRICS["ter"], validation=True))
    ter = iter([50.0, 40.0, 45.0, 40.0])  # better, better, worse, not better
    monkeypatch.setattr(
        train_mod.Trainer, "validate", lambda self: {"loss": 1.0, "ppl": 2.7, "ter": next(ter)}
    )
    cfg = load_config(write_config(tmp_path, "seq2seq", max_steps=100, valid_every=2, patience=2))
    # the config's choices were read from the table at import; the trainer reads it now
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, early_stop_metric="ter"))
    result = train_job.train(cfg)
    assert result.stop_reason == "early stopping: no improvement in 2 validations"
    assert [m["best"] for m in metrics(result.run) if m["split"] == "valid"] == [50, 40, 40, 40]
    assert load_checkpoint(result.run / "best.pt")["step"] == 4


def test_a_row_is_a_choice_of_the_config_without_further_edits(tmp_path):
    """One row added to a copy of the package's metrics.py: the config takes the new name for
    eval.metrics and train.early_stop_metric, and suggests it for a misspelling."""
    shutil.copytree(REPO / "nmt", tmp_path / "nmt", ignore=shutil.ignore_patterns("__pycache__"))
    table = tmp_path / "nmt" / "config" / "metrics.py"
    row = """    "chrf_pp": MetricRow("chrF++", True, SACREBLEU + "CHRF", {"word_order": 2}, True),\n"""
    text = table.read_text(encoding="utf-8")
    assert text.count('    "loss": ') == 1
    table.write_text(text.replace('    "loss": ', row + '    "loss": '), encoding="utf-8")
    code = (
        "import nmt\n"
        "from nmt.config.load import from_dict\n"
        "base = {'data': {'source': 'synthetic'}, 'model': {'arch': 'rnnsearch'}}\n"
        "print(nmt.__file__)\n"
        "cfg = from_dict({**base, 'eval': {'metrics': ['chrf_pp']},"
        " 'train': {'early_stop_metric': 'chrf_pp'}}, 'x')\n"
        "print(cfg.eval.metrics, cfg.train.early_stop_metric)\n"
        "try:\n"
        "    from_dict({**base, 'eval': {'metrics': ['chrf_p']}}, 'x')\n"
        "except Exception as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == str(tmp_path / "nmt" / "__init__.py")  # the copy, not the checkout
    assert out[1] == "['chrf_pp'] chrf_pp"
    assert out[2] == (
        "wrong type for 'eval.metrics[0]' in x: expected bleu | chrf | ter | bleu_lc | chrf_pp, "
        "got 'chrf_p'; did you mean 'chrf_pp'?"
    )


def test_every_sacrebleu_row_names_a_class_and_options_that_score():
    from nmt.scoring.metrics import make_metric

    hyps, refs = ["The cat sat on the mat ."], ["the cat sat on the mat ."]
    scored = {n: make_metric(n).corpus_score(hyps, [refs]).score for n in text_metrics()}
    assert set(scored) == {"bleu", "chrf", "ter", "bleu_lc"}
    assert scored["bleu_lc"] == pytest.approx(100.0) and scored["bleu"] < 100  # lowercase option
