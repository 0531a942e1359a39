"""The output's length against the reference, per source-length bucket: the length ratio and
brevity penalty BLEU itself uses, the share of hypotheses under half their reference, with
bootstrap intervals, in scores.json, the evaluate printout and the study report."""

from __future__ import annotations

import pytest
import sacrebleu

from nmt.scoring.metrics import score_report
from nmt.scoring.output_length import brevity_penalty
from nmt.scoring.tables import format_scores, length_table


def corpus():
    """Short sources translated whole; long sources (25 words) whose hypotheses keep only the
    first third of the reference: short output where the sentences are long."""
    srcs, hyps, refs = [], [], []
    for i in range(30):
        ref = " ".join(f"w{i}_{k}" for k in range(6))
        srcs.append(" ".join(["s"] * 5)), refs.append(ref), hyps.append(ref)
    for i in range(30):
        ref = " ".join(f"v{i}_{k}" for k in range(24))
        srcs.append(" ".join(["s"] * 25)), refs.append(ref), hyps.append(" ".join(ref.split()[:8]))
    return srcs, hyps, refs


def test_the_ratio_and_penalty_are_sacrebleus_own():
    srcs, hyps, refs = corpus()
    scores = score_report(srcs, hyps, refs, [10, 20])
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    assert scores["length"]["ratio"] == pytest.approx(bleu.sys_len / bleu.ref_len)
    assert scores["length"]["bp"] == pytest.approx(bleu.bp)


def test_short_output_shows_in_the_long_bucket_only():
    srcs, hyps, refs = corpus()
    short, middle, long = (b["length"] for b in score_report(srcs, hyps, refs, [10, 20])["buckets"])
    assert short["ratio"] == 1.0 and short["bp"] == 1.0 and short["short"] == 0.0
    assert middle is None  # no sentence of 11-20 words
    assert long["ratio"] == pytest.approx(8 / 24)
    assert long["bp"] == pytest.approx(brevity_penalty(8, 24))
    assert long["short"] == 1.0  # every hypothesis under half its reference


def test_each_length_figure_has_an_interval_that_holds_it():
    srcs, hyps, refs = corpus()
    hyps = hyps[:45] + [" ".join(r.split()[:20]) for r in refs[45:]]  # half the long ones fine
    scores = score_report(srcs, hyps, refs, [10], n_samples=200)
    for group in [scores, *(b for b in scores["buckets"])]:
        for key in ("ratio", "bp", "short"):
            lo, hi = group["length"][f"{key}_ci"]
            assert lo <= group["length"][key] <= hi
    lo, hi = scores["buckets"][1]["length"]["short_ci"]
    assert lo < 0.5 < hi  # 15 of 30 long hypotheses are short


def test_brevity_penalty_of_an_empty_output_is_zero():
    assert brevity_penalty(0, 10) == 0.0
    assert brevity_penalty(12, 10) == 1.0


def test_no_bleu_no_length():
    srcs, hyps, refs = corpus()
    scores = score_report(srcs, hyps, refs, [10], metrics=("chrf",))
    assert "length" not in scores and length_table({"m": scores}) == ""


def test_the_evaluate_printout_has_the_length_table():
    srcs, hyps, refs = corpus()
    text = format_scores(score_report(srcs, hyps, refs, [10, 20], n_samples=100))
    table = text.split("Output length against the reference:")[1]
    header = next(line for line in table.splitlines() if line.startswith("|"))
    assert [c.strip() for c in header.strip("|").split("|")][2:] == [
        "length ratio",
        "brevity penalty",
        "shorter than half",
    ]
    row = next(line for line in table.splitlines() if line.startswith("|") and " 21+ " in line)
    assert "0.333 [" in row and "100.0%" in row


def test_a_comparison_table_has_a_cell_per_model_and_the_pooled_row():
    srcs, hyps, refs = corpus()
    a = score_report(srcs, hyps, refs, [10, 20])
    b = score_report(srcs, refs, refs, [10, 20])  # the reference itself: ratio 1
    pooled = {"a": a["buckets"][2], "b": b["buckets"][2]}
    text = length_table({"a": a, "b": b}, pooled)
    row = next(line for line in text.splitlines() if "pooled" in line)
    assert "21+ pooled" in row and "0.333" in row and "1.000 · BP 1.000 · 0.0% short" in row
