import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from nmt.errors import NmtError
from nmt.evaluate import (DEFAULT_BUCKETS, bleu_by_length, bucket_bounds, corpus_scores,
                          load_scores, score_report)
from nmt.report import format_scores, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    assert bucket_bounds(DEFAULT_BUCKETS) == [(1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, None)]
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
        assert set(b) == {"lo", "hi", "n", "bleu"}
        assert b["bleu"] is None or isinstance(b["bleu"], float)
    assert data["buckets"][-1]["hi"] is None


def test_write_report_writes_hyps_scores_and_a_real_png(tmp_path, corpus):
    srcs, hyps, refs = corpus
    out = tmp_path / "new" / "dir"
    write_report(out, score_report(srcs, hyps, refs), hyps)
    assert sorted(p.name for p in out.iterdir()) == ["bleu_by_length.png", "hyps.txt", "scores.json"]
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


def test_scoring_and_reporting_do_not_pull_in_torch():
    # Data flows decoder -> metrics/report, never back: these modules must stay importable alone.
    code = ("import json, sys, nmt.evaluate, nmt.report; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'nmt'))))")
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["nmt", "nmt.errors", "nmt.evaluate", "nmt.files", "nmt.report"]
