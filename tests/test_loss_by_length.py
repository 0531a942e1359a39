"""Loss by length: the reference's loss per token (teacher-forced, as `nmt score` computes it, EOS
included), pooled by source-length bucket with 95% bootstrap intervals, the paired gap between
two models, and for the long sentences by tenth of the reference; in `nmt evaluate`'s report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nmt.jobs import evaluate as evaluate_job
from nmt.jobs.translate import score
from nmt.scoring.length_figures import gap_table, gap_verdicts, loss_figure, loss_table
from nmt.scoring.loss_by_length import (
    loss_gap,
    loss_report,
    read_sentence_losses,
    sentence_stats,
    tenth_stats,
)
from nmt.scoring.report import bleu_by_length_figure
from nmt.scoring.tables import format_scores

pytestmark = pytest.mark.usefixtures("one_thread")


def sources(lengths: list[int]) -> list[str]:
    return [" ".join(["w"] * n) for n in lengths]


def test_a_bucket_pools_its_tokens_not_its_sentences():
    srcs = sources([5, 5, 15])
    lps = [[-1.0, -1.0], [-4.0], [-0.5] * 4]  # sentences of 2, 1 and 4 tokens
    r = loss_report(srcs, lps, [10], n_samples=0)
    assert r["buckets"][0]["nll"] == pytest.approx(6.0 / 3)  # not the mean of 1.0 and 4.0
    assert r["buckets"][0]["tokens"] == 3 and r["buckets"][1]["nll"] == pytest.approx(0.5)
    assert r["nll"] == pytest.approx(8.0 / 7) and r["tokens"] == 7
    assert r["buckets"][1]["nll_ci"] is None and "bootstrap" not in r


def test_the_long_sentences_are_pooled_and_split_into_tenths_of_the_reference():
    # 20 tokens: two per tenth, the loss rising along the reference
    long = [[-float(k // 2)] * 1 for k in range(20)]
    lps = [[x[0] for x in long]] * 3 + [[-9.0] * 5]
    srcs = sources([55, 70, 65, 12])
    r = loss_report(srcs, lps, [10, 20, 30, 40, 50, 60], n_samples=200)
    assert (r["long"]["lo"], r["long"]["hi"], r["long"]["n"]) == (51, None, 3)
    tenths = r["positions"]["tenths"]
    assert [t["nll"] for t in tenths] == pytest.approx([float(k) for k in range(10)])
    assert all(t["tokens"] == 6 for t in tenths)
    assert tenth_stats([[-1.0] * 3])[0, 10:].sum() == 3  # short references: every token counted


def test_intervals_hold_the_estimate_and_resample_sentences():
    rng = np.random.default_rng(0)
    srcs = sources(list(rng.integers(1, 70, 400)))
    lps = [list(-rng.exponential(2.0, rng.integers(2, 30))) for _ in srcs]
    r = loss_report(srcs, lps, [10, 20, 30, 40, 50, 60], n_samples=300)
    for group in [r, r["long"], *[b for b in r["buckets"] if b["n"]]]:
        lo, hi = group["nll_ci"]
        assert lo <= group["nll"] <= hi and lo < hi
    assert r["bootstrap"] == {"samples": 300, "seed": 12345, "confidence": 0.95}


def test_the_gap_between_two_models_is_paired_and_grows_where_one_loses_the_long_sentences():
    rng = np.random.default_rng(1)
    lengths = list(rng.integers(1, 80, 600))
    srcs = sources(lengths)
    good = [list(-rng.exponential(1.0, 20)) for _ in srcs]
    # the fixed vector: as good on short sentences, one nat worse per token on long ones
    bad = [[x - (1.0 if n > 50 else 0.0) for x in lps] for n, lps in zip(lengths, good)]
    gap = loss_gap(srcs, sentence_stats(bad), sentence_stats(good), [10, 20, 30, 40, 50, 60], 300)
    assert gap["long"]["gap"] == pytest.approx(1.0) and gap["long"]["p"] < 0.01
    assert gap["buckets"][1]["gap"] == pytest.approx(0.0) and gap["buckets"][1]["p"] == 1.0
    lo, hi = gap["all"]["gap_ci"]
    assert lo <= gap["all"]["gap"] <= hi
    (line,) = gap_verdicts({"seq2seq - rnnsearch": gap})
    assert "51+ words" in line and "11-20" in line and "larger, with disjoint intervals" in line
    table = gap_table({"seq2seq - rnnsearch": gap})
    assert "51+ pooled" in table and "p (seq2seq - rnnsearch)" in table


def on_test(report: Path, **options) -> evaluate_job.EvalOptions:
    """`nmt evaluate`'s options for the test split, the report in `report`."""
    return evaluate_job.EvalOptions(split="test", report_dir=str(report), progress=False, **options)


def test_evaluate_reports_the_loss_that_nmt_score_gives(tiny_transformer_run, tmp_path, capsys):
    opts = on_test(tmp_path / "r")
    scores, report = evaluate_job.evaluate(str(tiny_transformer_run), opts)
    loss = json.loads((report / "scores.json").read_text())["loss_by_length"]
    assert [b["n"] for b in loss["buckets"]] == [b["n"] for b in scores["buckets"]]
    # nmt score on the same sentences: its token log-probs (EOS included), pooled
    score(
        [str(tiny_transformer_run)],
        str(report / "srcs.txt"),
        str(report / "refs.txt"),
        str(tmp_path / "scored.jsonl"),
    )
    rows = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    tokens = sum(len(r["token_log_probs"]) for r in rows)
    assert loss["tokens"] == tokens
    assert loss["nll"] == pytest.approx(-sum(r["score"] for r in rows) / tokens, rel=1e-4)
    lo, hi = loss["nll_ci"]
    assert lo <= loss["nll"] <= hi
    assert read_sentence_losses(report).shape == (len(rows), 2)
    assert (report / "loss_by_length.png").stat().st_size > 1000
    assert "loss on the reference = " in format_scores(scores)


def test_an_ensemble_reports_the_loss_of_its_averaged_log_probabilities(
    tiny_transformer_run, tmp_path
):
    one = on_test(tmp_path / "one")
    two = on_test(tmp_path / "two")
    single, _ = evaluate_job.evaluate(str(tiny_transformer_run), one)
    run = str(tiny_transformer_run)
    ensemble, _ = evaluate_job.evaluate([run, run], two)  # two copies: the same distribution
    assert ensemble["loss_by_length"]["nll"] == pytest.approx(
        single["loss_by_length"]["nll"], rel=1e-4
    )


def test_a_second_beam_reuses_the_first_beams_loss_and_a_changed_setting_does_not(
    tiny_transformer_run, tmp_path, monkeypatch
):
    run = str(tiny_transformer_run)
    greedy = on_test(tmp_path / "b1", beam=1)
    first, report = evaluate_job.evaluate(run, greedy)

    def no_teacher_forcing(*args, **kwargs):
        raise AssertionError("the loss was computed again")

    monkeypatch.setattr("nmt.jobs.evaluate_loss.score_pairs", no_teacher_forcing)
    beam = on_test(tmp_path / "b2", beam=2, loss_from=str(report))
    second, report2 = evaluate_job.evaluate(run, beam)
    assert second["loss_by_length"] == first["loss_by_length"]
    assert (report2 / "sentence_nll.tsv").read_text() == (report / "sentence_nll.tsv").read_text()
    # other buckets: the earlier loss does not answer, so it is computed (here: refused)
    other = on_test(tmp_path / "b3", beam=2, loss_from=str(report), buckets=[5])
    with pytest.raises(AssertionError, match="computed again"):
        evaluate_job.evaluate(run, other)


def test_the_loss_figure_has_a_line_per_model_in_both_panels():
    srcs = sources([5, 15, 25, 60, 70])
    lps = [[-1.0] * 12 for _ in srcs]
    rec = loss_report(srcs, lps, [10, 20, 30, 40, 50, 60], n_samples=50)
    fig = loss_figure({"seq2seq": rec, "rnnsearch": rec})
    left, right = fig.axes[:2]
    assert len(left.containers) == 2 and len(right.containers) == 2
    assert [t.get_text() for t in right.get_xticklabels()][0] == "0-\n10%"
    assert "51+ pooled" in loss_table({"a": rec, "b": rec})  # 51-60 and 61+ together


def test_the_papers_figure_draws_interval_bands_and_marks_the_training_cap():
    def scores(level: float) -> dict:
        buckets = [
            {"lo": lo, "hi": hi, "n": 40, "bleu": level, "bleu_ci": [level - 1, level + 1]}
            for lo, hi in [(1, 10), (11, 20), (21, 30), (31, 40), (41, None)]
        ]
        return {"bleu": level, "n": 200, "buckets": buckets, "bootstrap": {"samples": 9}}

    models = {"seq2seq-30": scores(10), "rnnsearch-30": scores(20), "rnnsearch-50": scores(25)}
    fig = bleu_by_length_figure(models, bands=True, caps={"seq2seq-30": 30, "rnnsearch-30": 30})
    ax = fig.axes[0]
    assert len(ax.collections) == 3  # one shaded band per model, no error bars
    (cap,) = [line for line in ax.lines if line.get_gid() == "cap30"]
    assert cap.get_xdata()[0] == pytest.approx(2.5)  # between 21-30 and 31-40
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("30 words" in t and "seq2seq-30, rnnsearch-30" in t for t in legend)


def test_a_report_without_sentence_losses_reads_as_none(tmp_path: Path):
    assert read_sentence_losses(tmp_path) is None
