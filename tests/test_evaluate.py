import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from nmt.errors import NmtError
from nmt.scoring.bootstrap import resample_counts
from nmt.scoring.metrics import (
    DEFAULT_BUCKETS,
    bleu_by_length,
    bucket_bounds,
    bucket_members,
    corpus_scores,
    load_scores,
    merge_small_buckets,
    paired_tests,
    score_report,
)
from nmt.scoring.report import write_report
from nmt.scoring.tables import format_scores

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.fixture
def corpus():
    """Sources of known word counts (bucket boundaries included), with imperfect hypotheses."""
    lengths = [1, 5, 10, 11, 20, 21, 35, 51, 70]
    srcs = [words(n) for n in lengths]
    refs = [f"the cat number {i} sat on the mat today" for i in range(len(lengths))]
    hyps = [f"the cat number {i} sat on a mat" if i % 2 else r for i, r in enumerate(refs)]
    return srcs, hyps, refs


def test_corpus_scores_match_sacrebleu(corpus):
    _, hyps, refs = corpus
    scores = corpus_scores(hyps, refs)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert scores["n"] == len(hyps)
    assert "tok:13a" in scores["signature"] and "nrefs:1" in scores["signature"]
    assert scores["chrf_signature"].startswith("nrefs:1")


def test_lowercased_bleu_is_sacrebleus_lc_with_its_own_signature(corpus):
    _, hyps, refs = corpus
    shouted = [h.upper() for h in hyps]
    scores = corpus_scores(shouted, refs, ("bleu", "bleu_lc"))
    assert scores["bleu_lc"] == pytest.approx(
        sacrebleu.corpus_bleu(shouted, [refs], lowercase=True).score
    )
    assert scores["bleu_lc"] == pytest.approx(corpus_scores(hyps, refs)["bleu"])
    assert scores["bleu"] < scores["bleu_lc"]
    assert "case:lc" in scores["bleu_lc_signature"] and "case:mixed" in scores["signature"]


def test_perfect_hypotheses_score_100(corpus):
    _, _, refs = corpus
    scores = corpus_scores(refs, refs)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)


def test_mismatched_or_empty_inputs_are_user_errors():
    with pytest.raises(NmtError, match="2 hypotheses but 1 references"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(NmtError, match="no hypotheses"):
        corpus_scores([], [])
    with pytest.raises(NmtError, match="sources"):
        bleu_by_length(["a"], ["a", "b"], ["a", "b"])


def test_bucket_bounds_are_inclusive_with_an_open_last_bucket():
    assert bucket_bounds(DEFAULT_BUCKETS) == [
        (1, 10),
        (11, 20),
        (21, 30),
        (31, 40),
        (41, 50),
        (51, None),
    ]
    assert bucket_bounds([5]) == [(1, 5), (6, None)]
    for bad in ([10, 10], [20, 10], [0, 10]):
        with pytest.raises(NmtError, match="length buckets"):
            bucket_bounds(bad)


def test_sentences_land_in_the_bucket_of_their_source_word_count(corpus):
    srcs, hyps, refs = corpus
    buckets = bleu_by_length(srcs, hyps, refs)
    assert [(b["lo"], b["hi"]) for b in buckets] == bucket_bounds(DEFAULT_BUCKETS)
    # lengths 1, 5, 10 | 11, 20 | 21 | 35 | (none) | 51, 70
    assert [b["n"] for b in buckets] == [3, 2, 1, 1, 0, 2]
    assert sum(b["n"] for b in buckets) == len(srcs)


def test_thin_buckets_merge_into_their_smaller_neighbour_until_each_is_big_enough():
    srcs = [words(n) for n in [5] * 200 + [15] * 300 + [25] * 160 + [35] * 60 + [45] * 30]
    srcs += [words(n) for n in [60] * 20]
    assert merge_small_buckets(srcs, [10, 20, 30, 40, 50], 0) == [10, 20, 30, 40, 50]
    # 51+ (20) joins 41-50 (30); 41+ (50) joins 31-40 (60): one 31+ bucket of 110 ...
    assert merge_small_buckets(srcs, [10, 20, 30, 40, 50], 100) == [10, 20, 30]
    # ... which still holds fewer than 150, so it joins 21-30 (160) into 21+ (270)
    merged = merge_small_buckets(srcs, [10, 20, 30, 40, 50], 150)
    assert merged == [10, 20]
    counts = [len(m) for m in bucket_members(srcs, bucket_bounds(merged))]
    assert counts == [200, 300, 270] and sum(counts) == len(srcs)
    assert merge_small_buckets(srcs, [10, 20], 10_000) == []  # one bucket: all lengths


def test_the_printed_table_says_which_buckets_were_merged(corpus):
    srcs, hyps, refs = corpus
    scores = score_report(srcs, hyps, refs, [10, 30])
    assert "merged" not in format_scores(scores)
    scores["bucket_merge"] = {"asked": [10, 20, 30, 40, 50], "min_sentences": 150}
    assert "at least 150 sentences (eval.min_bucket; asked for upper bounds 10,20,30,40,50)" in (
        format_scores(scores)
    )


def test_empty_bucket_has_no_bleu(corpus):
    srcs, hyps, refs = corpus
    empty = [b for b in bleu_by_length(srcs, hyps, refs) if b["n"] == 0]
    assert empty and all(b["bleu"] is None for b in empty)


def test_each_bucket_is_scored_as_its_own_corpus(corpus):
    srcs, hyps, refs = corpus
    for b in bleu_by_length(srcs, hyps, refs):
        if b["n"] == 0:
            continue
        hi = b["hi"] if b["hi"] is not None else float("inf")
        idx = [i for i, s in enumerate(srcs) if b["lo"] <= len(s.split()) <= hi]
        expected = sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        assert b["bleu"] == pytest.approx(expected)


def test_custom_bounds(corpus):
    srcs, hyps, refs = corpus
    buckets = bleu_by_length(srcs, hyps, refs, bounds=[10, 40])
    assert [(b["lo"], b["hi"], b["n"]) for b in buckets] == [(1, 10, 3), (11, 40, 4), (41, None, 2)]


def test_scores_json_schema(tmp_path, corpus):
    srcs, hyps, refs = corpus
    write_report(tmp_path, score_report(srcs, hyps, refs), hyps, plot=False)
    data = json.loads((tmp_path / "scores.json").read_text())
    assert {"bleu", "chrf", "signature", "n", "buckets"} <= data.keys()
    assert isinstance(data["bleu"], float) and isinstance(data["chrf"], float)
    assert isinstance(data["signature"], str) and data["n"] == len(hyps)
    for b in data["buckets"]:
        assert set(b) == {"lo", "hi", "n", "bleu", "chrf", "length"}
        assert b["bleu"] is None or isinstance(b["bleu"], float)
    assert data["buckets"][-1]["hi"] is None


def test_write_report_writes_hyps_scores_and_a_real_png(tmp_path, corpus):
    srcs, hyps, refs = corpus
    out = tmp_path / "new" / "dir"
    write_report(out, score_report(srcs, hyps, refs), hyps)
    assert sorted(p.name for p in out.iterdir()) == [
        "bleu_by_length.png",
        "hyps.txt",
        "scores.json",
    ]
    write_report(out, score_report(srcs, hyps, refs), hyps, srcs=srcs, refs=refs)
    assert lines_of(out / "srcs.txt") == srcs and lines_of(out / "refs.txt") == refs
    assert (out / "bleu_by_length.png").read_bytes()[:8] == PNG_MAGIC
    assert load_scores(out) == json.loads((out / "scores.json").read_text())


def test_hyps_txt_keeps_one_line_per_hypothesis_even_empty_ones(tmp_path):
    hyps = ["first", "", "third has\na stray newline", ""]
    refs = ["first", "second", "third", "fourth"]
    write_report(tmp_path, score_report(refs, hyps, refs), hyps, plot=False)
    lines = (tmp_path / "hyps.txt").read_text().split("\n")
    assert lines[-1] == ""  # file ends with a newline
    assert lines[:-1] == ["first", "", "third has a stray newline", ""]


def test_load_scores_names_the_path_when_missing_or_corrupt(tmp_path):
    with pytest.raises(NmtError, match=re.escape(str(tmp_path / "scores.json"))):
        load_scores(tmp_path)
    (tmp_path / "scores.json").write_text("{not json")
    with pytest.raises(NmtError, match=re.escape(str(tmp_path / "scores.json"))):
        load_scores(tmp_path)
    (tmp_path / "scores.json").write_text('{"bleu": 1.0}')
    with pytest.raises(NmtError, match=re.escape(str(tmp_path / "scores.json"))):
        load_scores(tmp_path)


def test_format_scores_shows_both_metrics_and_the_bucket_table(corpus):
    srcs, hyps, refs = corpus
    scores = score_report(srcs, hyps, refs)
    text = format_scores(scores)
    assert text.startswith(f"BLEU = {scores['bleu']:.2f} (signature {scores['signature']})\n")
    assert f"chrF = {scores['chrf']:.2f}" in text
    assert "51+" in text and "1-10" in text
    assert "41-50" in text.split("\n\n")[-1]  # the empty bucket is named under the table only


def test_scoring_and_reporting_do_not_pull_in_torch():
    # Data flows decoder -> metrics/report, never back: these modules must stay importable alone.
    code = (
        "import json, sys, nmt.scoring.metrics, nmt.scoring.report, nmt.scoring.compare; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'nmt'))))"
    )
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    # (nmt.run_dir, below them, names the reports in a run directory; it needs only the config)
    assert json.loads(out) == sorted(
        ["nmt", "nmt.config", "nmt.config.fields", "nmt.config.load", "nmt.config.schema"]
        + ["nmt.config.yaml_file"]
        + ["nmt.config.metrics"]  # the metric table: names, labels, directions
        + ["nmt.errors", "nmt.files", "nmt.run_dir", "nmt.version", "nmt.scoring"]
        + ["nmt.scoring.bootstrap", "nmt.scoring.compare", "nmt.scoring.metrics"]
        + ["nmt.scoring.output_length", "nmt.scoring.report", "nmt.scoring.tables"]
    )


# ---------------------------------------------------------------------------- bootstrap


def noisy_corpus(n: int, drop: float, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """n sentences of 3 to 40 words, hypotheses that drop each reference word with `drop`."""
    rng = np.random.default_rng(seed)
    refs = [
        " ".join(f"w{int(x)}" for x in rng.integers(0, 300, size=int(k)))
        for k in rng.integers(3, 40, size=n)
    ]
    hyps = [" ".join(w for w in r.split() if rng.random() >= drop) for r in refs]
    return refs, hyps, refs  # the source is the reference: lengths spread over the buckets


def test_intervals_contain_the_point_estimate_overall_and_per_bucket():
    srcs, hyps, refs = noisy_corpus(300, 0.3)
    scores = score_report(srcs, hyps, refs, n_samples=200, metrics=("bleu", "chrf", "ter"))
    assert scores["bootstrap"] == {"samples": 200, "seed": 12345, "confidence": 0.95}
    for where in [scores, *[b for b in scores["buckets"] if b["n"]]]:
        for m in ("bleu", "chrf", "ter"):
            lo, hi = where[f"{m}_ci"]
            assert lo <= where[m] <= hi and lo < hi
    empty = [b for b in scores["buckets"] if not b["n"]]
    assert empty and all(b["bleu_ci"] is None and b["chrf"] is None for b in empty)


def test_intervals_shrink_with_more_sentences():
    widths = []
    for n in (100, 1600):
        srcs, hyps, refs = noisy_corpus(n, 0.3)
        ci = score_report(srcs, hyps, refs, n_samples=200)["bleu_ci"]
        widths.append(ci[1] - ci[0])
    assert widths[1] < widths[0] / 2  # 16 times the sentences: about a quarter of the width


def test_intervals_are_reproducible_with_the_seed():
    srcs, hyps, refs = noisy_corpus(100, 0.3)
    a, b = (score_report(srcs, hyps, refs, n_samples=100, seed=s)["bleu_ci"] for s in (1, 1))
    c = score_report(srcs, hyps, refs, n_samples=100, seed=2)["bleu_ci"]
    assert a == b and a != c


def test_resample_counts_draw_n_sentences_per_resample():
    counts = resample_counts(50, 30, seed=0)
    assert counts.shape == (30, 50) and (counts.sum(axis=1) == 50).all() and (counts >= 0).all()


def test_identical_systems_are_not_significantly_different():
    srcs, hyps, refs = noisy_corpus(200, 0.3)
    test = paired_tests(srcs, refs, hyps, list(hyps), DEFAULT_BUCKETS, n_samples=200)
    assert all(p > 0.05 for p in test["p"].values())
    assert all(p is None or p > 0.05 for b in test["buckets"] for p in b.values())


def test_a_clearly_better_system_is_significantly_better():
    srcs, worse, refs = noisy_corpus(200, 0.5)
    _, better, _ = noisy_corpus(200, 0.1)
    test = paired_tests(srcs, refs, worse, better, DEFAULT_BUCKETS, n_samples=200)
    assert test["p"]["bleu"] < 0.05 and test["p"]["chrf"] < 0.05
    assert [b["bleu"] < 0.05 for b in test["buckets"] if b["bleu"] is not None] == [True] * 4


def test_paired_p_values_equal_sacrebleus_paired_bootstrap_test(monkeypatch):
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    srcs, a, refs = noisy_corpus(120, 0.3)
    _, b, _ = noisy_corpus(120, 0.28, seed=1)
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    _, theirs = PairedTest(
        [("a", a), ("b", b)],
        {"BLEU": BLEU(), "chrF2": CHRF()},
        [refs],
        test_type="bs",
        n_samples=300,
    )()
    ours = paired_tests(srcs, refs, a, b, DEFAULT_BUCKETS, n_samples=300, seed=7)["p"]
    assert ours["bleu"] == pytest.approx(theirs["BLEU"][1].p_value)
    assert ours["chrf"] == pytest.approx(theirs["chrF2"][1].p_value)


def test_ter_only_when_asked_and_unknown_metrics_are_errors(corpus):
    srcs, hyps, refs = corpus
    assert "ter" not in score_report(srcs, hyps, refs)
    scores = score_report(srcs, hyps, refs, metrics=("bleu", "chrf", "ter"))
    assert scores["ter"] == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score)
    assert "ter_signature" in scores and "ter" in format_scores(scores).lower()
    with pytest.raises(NmtError, match="unknown metric 'blue'; .*did you mean 'bleu'"):
        score_report(srcs, hyps, refs, metrics=("blue",))
    # COMET is a row of the table, but its scores come from a model, not from the text
    with pytest.raises(NmtError, match="'comet' is not computed from hypotheses.*--comet-model"):
        score_report(srcs, hyps, refs, metrics=("comet",))


def test_comet_is_the_mean_of_its_sentence_scores_per_bucket_with_intervals(corpus):
    from nmt.scoring.metrics import MeanScore

    srcs, hyps, refs = corpus
    sent = [0.1 * i for i in range(len(hyps))]
    scores = score_report(
        srcs, hyps, refs, n_samples=100, extra={"comet": (MeanScore("comet:model.ckpt"), sent)}
    )
    assert scores["comet"] == pytest.approx(np.mean(sent))
    assert scores["comet_signature"] == "comet:model.ckpt"
    assert scores["buckets"][0]["comet"] == pytest.approx(np.mean(sent[:3]))  # lengths 1, 5, 10
    lo, hi = scores["comet_ci"]
    assert lo <= scores["comet"] <= hi


def test_comet_needs_a_local_checkpoint_and_the_package(tmp_path, monkeypatch):
    import sys
    import types

    from nmt.scoring.comet import comet_scores

    with pytest.raises(NmtError, match="no such file.*nothing is downloaded"):
        comet_scores(str(tmp_path / "nowhere.ckpt"), ["s"], ["h"], ["r"])
    ckpt = tmp_path / "model.ckpt"
    ckpt.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "comet", None)  # not installed
    with pytest.raises(NmtError, match="pip install unbabel-comet"):
        comet_scores(str(ckpt), ["s"], ["h"], ["r"])
    seen = {}

    class Model:
        def predict(self, data, batch_size, gpus, progress_bar):
            return types.SimpleNamespace(scores=[len(d["mt"]) / 10 for d in data])

    def load_from_checkpoint(path):
        seen["path"], seen["offline"] = path, os.environ.get("HF_HUB_OFFLINE")
        return Model()

    monkeypatch.setitem(
        sys.modules, "comet", types.SimpleNamespace(load_from_checkpoint=load_from_checkpoint)
    )
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert comet_scores(str(ckpt), ["a", "b"], ["xy", "xyz"], ["r", "r"]) == [0.2, 0.3]
    assert seen == {"path": str(ckpt), "offline": "1"} and "HF_HUB_OFFLINE" not in os.environ
