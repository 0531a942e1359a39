import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from nmt.errors import NmtError
from nmt.scoring.compare import compare_reports, load_comparison, paired, verdicts
from nmt.scoring.metrics import score_report
from nmt.scoring.report import (
    bleu_by_length_figure,
    plot_attention,
    plot_bleu_by_length,
    write_report,
)
from nmt.scoring.tables import BETTER, WORSE, bucket_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def corpus(seed: int, n: int = 40) -> tuple[list[str], list[str], list[str]]:
    """Sources of 1 to 69 words (so every default bucket is used), hypotheses of which about
    half differ from their reference."""
    rng = np.random.default_rng(seed)
    srcs = [" ".join(["w"] * int(k)) for k in np.random.default_rng(0).integers(1, 70, size=n)]
    refs = [f"sentence {i} has some words in it" for i in range(n)]
    hyps = [r if rng.random() < 0.5 else r.replace("some", "a few") for r in refs]
    return srcs, hyps, refs


def make_scores(seed: int, samples: int = 0) -> dict:
    return score_report(*corpus(seed), n_samples=samples)


def table_rows(table: str) -> list[list[str]]:
    lines = table.strip().split("\n")[2:]  # drop header and rule
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_bucket_table_has_a_row_per_bucket_and_a_column_per_model():
    a, b = make_scores(0), make_scores(1)
    table = bucket_table({"rnnsearch": a, "transformer": b})
    header = [c.strip() for c in table.split("\n")[0].strip("|").split("|")]
    assert header[-2:] == ["rnnsearch", "transformer"]
    rows = table_rows(table.split("\n\n")[0])
    assert [r[0] for r in rows] == ["1-10", "11-20", "21-30", "31-40", "41-50", "51+", "all"]
    assert rows[-1][1:] == [str(a["n"]), f"{a['bleu']:.2f}", f"{b['bleu']:.2f}"]
    for row, ba, bb in zip(rows, a["buckets"], b["buckets"]):
        assert row[1] == str(ba["n"])  # n comes from the first model
        assert row[2] == ("-" if ba["bleu"] is None else f"{ba['bleu']:.2f}")
        assert row[3] == ("-" if bb["bleu"] is None else f"{bb['bleu']:.2f}")


def test_bucket_table_drops_empty_buckets_and_says_so_under_the_table():
    scores = {
        "bleu": 12.5,
        "n": 3,
        "buckets": [
            {"lo": 1, "hi": 10, "n": 3, "bleu": 12.5},
            {"lo": 11, "hi": 20, "n": 0, "bleu": None},
            {"lo": 21, "hi": None, "n": 0, "bleu": None},
        ],
    }
    table, note = bucket_table({"m": scores}).split("\n\n")
    assert table_rows(table) == [["1-10", "3", "12.50"], ["all", "3", "12.50"]]
    assert (
        note.strip() == "Empty buckets not shown: 11-20, 21+ source words (no sentence that long)."
    )


def test_bucket_table_shows_intervals_and_p_values_against_the_first_model():
    a, b = make_scores(0, samples=100), make_scores(1, samples=100)
    tests = {
        "b": {
            "p": {"bleu": 0.0004},
            "samples": 100,
            "buckets": [{"bleu": 0.2 if x["n"] else None} for x in a["buckets"]],
        }
    }
    table = bucket_table({"a": a, "b": b}, tests=tests)
    header = [c.strip() for c in table.split("\n")[0].strip("|").split("|")]
    assert header == ["source words", "n", "a", "b", "p (b)"]
    rows = table_rows(table.split("\n\n")[0])
    lo, hi = a["bleu_ci"]
    assert rows[-1] == [
        "all",
        "40",
        f"{a['bleu']:.2f} [{lo:.1f}, {hi:.1f}]",
        f"{b['bleu']:.2f} [{b['bleu_ci'][0]:.1f}, {b['bleu_ci'][1]:.1f}]",
        "<0.001 " + (BETTER if b["bleu"] > a["bleu"] else WORSE),
    ]
    assert all(r[-1] == "0.200" for r in rows[:-1])
    assert "95% bootstrap interval (100 resamples" in table
    assert (
        f"paired bootstrap test against a (100 resamples); {BETTER} significantly better, "
        f"{WORSE} significantly worse than a (p < 0.05)" in table
    )


def scores(values: list[float], metric: str = "bleu") -> dict:
    """A report of two length buckets with these scores, each +-2 as its 95% interval."""
    buckets = [
        {
            "lo": 1,
            "hi": 10,
            "n": 10,
            metric: values[0],
            f"{metric}_ci": [values[0] - 2, values[0] + 2],
        },
        {
            "lo": 11,
            "hi": None,
            "n": 20,
            metric: values[1],
            f"{metric}_ci": [values[1] - 2, values[1] + 2],
        },
    ]
    mean = sum(values) / 2
    return {metric: mean, f"{metric}_ci": [mean - 1, mean + 1], "n": 30, "buckets": buckets}


def test_significance_marks_say_which_way_a_model_differs_from_the_first():
    """A model significantly worse than the baseline is marked as worse, not starred like a
    better one; for TER lower is better."""
    ps = {"p": {"bleu": 0.01, "ter": 0.01}, "samples": 100}
    buckets = [{"bleu": 0.01, "ter": 0.01}, {"bleu": 0.5, "ter": 0.5}]
    tests = {"worse": {**ps, "buckets": buckets}, "better": {**ps, "buckets": buckets}}
    models = {"seq2seq": scores([30, 20]), "worse": scores([5, 15]), "better": scores([40, 25])}
    rows = table_rows(bucket_table(models, tests=tests).split("\n\n")[0])
    assert [r[4] for r in rows] == [f"0.010 {WORSE}", "0.500", f"0.010 {WORSE}"]
    assert [r[6] for r in rows] == [f"0.010 {BETTER}", "0.500", f"0.010 {BETTER}"]
    ter = {
        n: scores(v, "ter")
        for n, v in (("seq2seq", [50, 60]), ("worse", [70, 80]), ("better", [30, 40]))
    }
    rows = table_rows(bucket_table(ter, "ter", tests).split("\n\n")[0])
    assert (rows[0][4], rows[0][6]) == (f"0.010 {WORSE}", f"0.010 {BETTER}")


def test_the_plot_marks_direction_above_the_bars_and_keeps_the_legend_off_them():
    ps = {"p": {"bleu": 0.01}, "samples": 100}
    tests = {
        "worse": {**ps, "buckets": [{"bleu": 0.01}, {"bleu": 0.01}]},
        "better": {**ps, "buckets": [{"bleu": 0.5}, {"bleu": 0.01}]},
    }
    models = {"seq2seq": scores([30, 20]), "worse": scores([5, 15]), "better": scores([40, 25])}
    fig = bleu_by_length_figure(models, title="t", tests=tests)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    marks = {m: [ln for ln in ax.lines if ln.get_gid() == m] for m in ("better", "worse")}
    assert [ln.get_marker() for ln in marks["better"]] == ["^"]  # only where p < 0.05
    assert [ln.get_marker() for ln in marks["worse"]] == ["v", "v"]
    frame = ax.get_window_extent()
    for ln in marks["better"] + marks["worse"]:
        ((x, y),) = ln.get_xydata()
        px = ax.transData.transform((x, y))[1]
        half = ln.get_markersize() / 2 * fig.dpi / 72
        assert px + half < frame.y1  # the whole mark inside the frame, clear of it
    assert ax.get_ylim()[1] > 42 + 2  # above the highest bar (40 + 2) and its mark
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= frame.x1  # outside the axes: it can cover no error bar
    assert any(
        "significantly worse than\nseq2seq" in t.get_text() for t in ax.get_legend().get_texts()
    )


def test_models_with_different_buckets_cannot_be_tabled():
    a = {
        "buckets": [
            {"lo": 1, "hi": 10, "n": 1, "bleu": 1.0},
            {"lo": 11, "hi": None, "n": 1, "bleu": 1.0},
        ]
    }
    b = {
        "buckets": [
            {"lo": 1, "hi": 20, "n": 1, "bleu": 1.0},
            {"lo": 21, "hi": None, "n": 1, "bleu": 1.0},
        ]
    }
    with pytest.raises(NmtError, match="different length buckets"):
        bucket_table({"a": a, "b": b})


def test_plot_bleu_by_length_writes_a_png(tmp_path):
    path = tmp_path / "plot.png"
    plot_bleu_by_length({"a": make_scores(0), "b": make_scores(1)}, path, title="t")
    assert path.read_bytes()[:8] == PNG_MAGIC


def write(report: Path, seed: int, samples: int = 0, **extra) -> dict:
    srcs, hyps, refs = corpus(seed)
    scores = {**make_scores(seed, samples), **extra}
    write_report(report, scores, hyps, plot=False, srcs=srcs, refs=refs)
    return scores


def test_compare_reports_writes_plot_and_table_for_two_runs(tmp_path):
    for name, seed in [("rnnsearch", 0), ("transformer", 1)]:
        write(tmp_path / name, seed)
    out = tmp_path / "cmp"
    table = compare_reports(
        [str(tmp_path / "rnnsearch"), str(tmp_path / "transformer")], out, n_samples=100
    )
    assert (out / "compare.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "compare.md").read_text() == table
    assert table.startswith("## BLEU by source length") and "## chrF by source length" in table
    header = table.split("\n")[2]
    assert "rnnsearch" in header and "transformer" in header and "p (transformer)" in header
    tests = json.loads((out / "compare.json").read_text())["tests"]["transformer"]
    assert tests["baseline"] == "rnnsearch" and 0 < tests["p"]["bleu"] <= 1
    assert len(tests["buckets"]) == 6


def test_compare_keeps_lowercased_bleu_and_comet_when_every_report_holds_them(tmp_path):
    from nmt.scoring.metrics import MeanScore

    for name, seed in [("a", 0), ("b", 1)]:
        srcs, hyps, refs = corpus(seed)
        comet = (MeanScore("comet:m.ckpt"), [0.5 + 0.01 * seed] * len(hyps))
        scores = score_report(
            srcs, hyps, refs, metrics=("bleu", "chrf", "bleu_lc"), extra={"comet": comet}
        )
        write_report(tmp_path / name, scores, hyps, plot=False, srcs=srcs, refs=refs)
    table = compare_reports(
        [str(tmp_path / "a"), str(tmp_path / "b")], tmp_path / "c", n_samples=50
    )
    titles = [line for line in table.split("\n") if line.startswith("## ")]
    assert titles == [f"## {m} by source length" for m in ("BLEU", "chrF", "BLEU (lc)", "COMET")]
    tests = json.loads((tmp_path / "c" / "compare.json").read_text())["tests"]["b"]
    assert set(tests["p"]) == {"bleu", "chrf", "bleu_lc"}  # hypotheses rescored; COMET cannot be
    comet_rows = table_rows(table.split("## COMET by source length\n\n")[1].split("\n\n")[0])
    assert comet_rows[-1] == ["all", "40", "0.50", "0.51", "-"]  # its scores, no p-value


def test_compare_reports_uses_given_names_and_rejects_missing_scores(tmp_path):
    write(tmp_path / "run1", 0)
    table = compare_reports([str(tmp_path / "run1")], tmp_path / "cmp", names=["baseline"])
    assert "baseline" in table.split("\n")[2]
    with pytest.raises(NmtError, match="scores.json"):
        compare_reports([str(tmp_path / "run1"), str(tmp_path / "nowhere")], tmp_path / "cmp")


def test_compare_takes_run_directories_names_them_and_picks_reports(tmp_path):
    for run, seed in (("a", 0), ("b", 1)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "config.yaml").write_text("{}\n")
        write(tmp_path / run / "eval_test_beam1", seed, split="test", beam=1)
        write(tmp_path / run / "eval_test_beam5", seed + 2, split="test", beam=5)
    os.utime(tmp_path / "a" / "eval_test_beam1" / "scores.json", (1, 1))  # beam 5 is newest
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    comp = load_comparison(runs)
    assert list(comp.scores) == ["a", "b"]
    assert comp.reports["a"].name == "eval_test_beam5"
    assert load_comparison(runs, beam=1).reports["a"].name == "eval_test_beam1"
    # reports inside runs are named after their runs; two of one run get their report names
    reports = [str(tmp_path / "a" / "eval_test_beam1"), str(tmp_path / "a" / "eval_test_beam5")]
    assert list(load_comparison(reports).scores) == ["a (eval_test_beam1)", "a (eval_test_beam5)"]
    with pytest.raises(
        NmtError,
        match="no report for split valid in .*reports there: eval_test_beam1, eval_test_beam5",
    ):
        load_comparison(runs, split="valid")


def test_compare_refuses_reports_on_different_test_sets(tmp_path):
    write(tmp_path / "a", 0, test_set={"split": "test", "sha256": "1"})
    write(tmp_path / "b", 1, test_set={"split": "valid", "sha256": "2"})
    with pytest.raises(
        NmtError,
        match="'b' \\(valid, 40 sentences\\) and 'a' \\(test, 40 "
        "sentences\\) were scored on different test sets",
    ):
        compare_reports([str(tmp_path / "a"), str(tmp_path / "b")], tmp_path / "cmp")


def test_paired_test_in_compare_finds_a_clearly_better_system_and_not_an_identical_one(tmp_path):
    srcs = [" ".join(["w"] * (3 + i % 25)) for i in range(150)]
    refs = [f"the {i} cat sat on the mat near the door today" for i in range(150)]
    worse = [f"a {i} dog sat" for i in range(150)]
    for name, hyps in (
        ("base", refs[:75] + worse[75:]),
        ("same", refs[:75] + worse[75:]),
        ("better", refs),
    ):
        write_report(
            tmp_path / name, score_report(srcs, hyps, refs), hyps, plot=False, srcs=srcs, refs=refs
        )
    comp = load_comparison([str(tmp_path / n) for n in ("base", "same", "better")])
    paired(comp, n_samples=200)
    assert comp.tests["same"]["p"]["bleu"] == 1.0
    assert comp.tests["better"]["p"]["bleu"] < 0.05
    assert any("better beats base significantly" in v for v in verdicts(comp))
    assert any("no significant difference between same and base" in v for v in verdicts(comp))


def test_plot_attention_writes_a_png(tmp_path):
    src, tgt = ["le", "chat", "</s>"], ["the", "cat", "sat", "</s>"]
    weights = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))
    path = tmp_path / "attn.png"
    plot_attention(src, tgt, weights.tolist(), path, title="attention")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plot_attention_rejects_transposed_weights(tmp_path):
    with pytest.raises(NmtError, match="expected \\(2, 3\\)"):
        plot_attention(["a", "b", "c"], ["x", "y"], np.zeros((3, 2)), tmp_path / "attn.png")


def png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_attention_plot_of_a_long_sentence_stays_readable_in_size(tmp_path):
    src = [f"word{i}" for i in range(300)] + ["</s>"]
    tgt = [f"out{i}" for i in range(280)] + ["</s>"]
    weights = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))
    plot_attention(src, tgt, weights, tmp_path / "long.png", title="long")
    plot_attention(src[:6], tgt[:5], weights[:5, :6], tmp_path / "short.png", title="short")
    width, height = png_size(tmp_path / "long.png")
    assert width <= 2000 and height <= 1700
    assert png_size(tmp_path / "short.png")[0] < width


def test_surfaces_are_the_input_text_of_each_piece_unknown_words_included(tmp_path):
    import sentencepiece as spm

    from nmt.pieces import display, surfaces

    text = tmp_path / "train.txt"
    text.write_text("".join(f"the cat sat on the mat number {i}\n" for i in range(200)))
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(tmp_path / "m"),
        vocab_size=30,
        model_type="unigram",
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    sentence = "the cat sat on Zürich"
    got = surfaces(sp, sentence)
    assert len(got) == len(sp.encode(sentence))
    assert "".join(got) == sentence.replace(" ", "")
    assert any(sp.id_to_piece(i) == "<unk>" for i in sp.encode(sentence))  # "Z", "ü" unknown
    assert display("\u2581the") == "the"
