import numpy as np
import pytest

from nmt.errors import NmtError
from nmt.evaluate import score_report
from nmt.report import write_report
from nmt.report import bucket_table, compare_reports, plot_attention, plot_bleu_by_length

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_scores(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    srcs = [" ".join(["w"] * int(n)) for n in rng.integers(1, 70, size=40)]
    refs = [f"sentence {i} has some words in it" for i in range(40)]
    hyps = [r if rng.random() < 0.5 else r.replace("some", "a few") for r in refs]
    return score_report(srcs, hyps, refs)


def table_rows(table: str) -> list[list[str]]:
    lines = table.strip().split("\n")[2:]  # drop header and rule
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_bucket_table_has_a_row_per_bucket_and_a_column_per_model():
    a, b = make_scores(0), make_scores(1)
    table = bucket_table({"rnnsearch": a, "transformer": b})
    header = [c.strip() for c in table.split("\n")[0].strip("|").split("|")]
    assert header[-2:] == ["rnnsearch", "transformer"]
    rows = table_rows(table)
    assert [r[0] for r in rows] == ["1-10", "11-20", "21-30", "31-40", "41-50", "51+"]
    for row, ba, bb in zip(rows, a["buckets"], b["buckets"]):
        assert row[1] == str(ba["n"])  # n comes from the first model
        assert row[2] == ("-" if ba["bleu"] is None else f"{ba['bleu']:.2f}")
        assert row[3] == ("-" if bb["bleu"] is None else f"{bb['bleu']:.2f}")


def test_bucket_table_marks_empty_buckets_with_a_dash():
    scores = {"buckets": [{"lo": 1, "hi": 10, "n": 3, "bleu": 12.5}, {"lo": 11, "hi": None, "n": 0, "bleu": None}]}
    assert table_rows(bucket_table({"m": scores})) == [["1-10", "3", "12.50"], ["11+", "0", "-"]]


def test_models_with_different_buckets_cannot_be_tabled():
    a = {"buckets": [{"lo": 1, "hi": 10, "n": 1, "bleu": 1.0}, {"lo": 11, "hi": None, "n": 1, "bleu": 1.0}]}
    b = {"buckets": [{"lo": 1, "hi": 20, "n": 1, "bleu": 1.0}, {"lo": 21, "hi": None, "n": 1, "bleu": 1.0}]}
    with pytest.raises(NmtError, match="different length buckets"):
        bucket_table({"a": a, "b": b})


def test_plot_bleu_by_length_writes_a_png(tmp_path):
    path = tmp_path / "plot.png"
    plot_bleu_by_length({"a": make_scores(0), "b": make_scores(1)}, path, title="t")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_compare_reports_writes_plot_and_table_for_two_runs(tmp_path):
    for name, seed in [("rnnsearch", 0), ("transformer", 1)]:
        write_report(tmp_path / name, make_scores(seed), ["h"], plot=False)
    out = tmp_path / "cmp"
    table = compare_reports([str(tmp_path / "rnnsearch"), str(tmp_path / "transformer")], out)
    assert (out / "compare.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "compare.md").read_text() == table
    assert "rnnsearch" in table.split("\n")[0] and "transformer" in table.split("\n")[0]
    assert len(table_rows(table)) == 6


def test_compare_reports_uses_given_names_and_rejects_missing_scores(tmp_path):
    write_report(tmp_path / "run1", make_scores(0), ["h"], plot=False)
    table = compare_reports([str(tmp_path / "run1")], tmp_path / "cmp", names=["baseline"])
    assert "baseline" in table.split("\n")[0]
    with pytest.raises(NmtError, match="scores.json"):
        compare_reports([str(tmp_path / "run1"), str(tmp_path / "nowhere")], tmp_path / "cmp")


def test_plot_attention_writes_a_png(tmp_path):
    src, tgt = ["le", "chat", "</s>"], ["the", "cat", "sat", "</s>"]
    weights = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))
    path = tmp_path / "attn.png"
    plot_attention(src, tgt, weights.tolist(), path, title="attention")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plot_attention_rejects_transposed_weights(tmp_path):
    with pytest.raises(NmtError, match="expected \\(2, 3\\)"):
        plot_attention(["a", "b", "c"], ["x", "y"], np.zeros((3, 2)), tmp_path / "attn.png")
