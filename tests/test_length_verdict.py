"""The study's one-line verdict per model: does its BLEU fall with length, judged by intervals."""

from __future__ import annotations

from pathlib import Path

from nmt.scoring.compare import Comparison, length_verdicts


def bucket(lo: int, hi: int | None, bleu: float, ci: tuple[float, float]) -> dict:
    return {"lo": lo, "hi": hi, "n": 300, "bleu": bleu, "bleu_ci": list(ci)}


def scores(*buckets: dict) -> dict:
    return {"buckets": list(buckets), "bleu": 20.0, "n": 1800}


def comparison(**models: dict) -> Comparison:
    return Comparison(models, {name: Path(name) for name in models})


def test_a_fixed_vector_model_falls_and_attention_keeps_its_level():
    fixed = scores(
        bucket(1, 10, 22.0, (20.0, 24.0)),
        bucket(11, 20, 20.0, (19.0, 21.0)),
        bucket(51, 60, 11.0, (10.0, 12.0)),
        bucket(61, None, 9.0, (8.0, 10.0)),
    )
    attention = scores(
        bucket(1, 10, 30.0, (28.0, 32.0)),
        bucket(11, 20, 30.0, (29.0, 31.0)),
        bucket(51, 60, 28.5, (27.0, 30.0)),
        bucket(61, None, 27.0, (25.5, 28.5)),
    )
    lines = length_verdicts(comparison(seq2seq=fixed, rnnsearch=attention))
    assert lines[0].startswith("- seq2seq falls with length (below its 11-20 level")
    assert "51-60: 11.00 [10.0, 12.0], 61+: 9.00 [8.0, 10.0] against 11-20" in lines[0]
    assert lines[0].endswith("it keeps 45% of its 11-20 score")
    assert lines[1].startswith("- rnnsearch keeps its level (at least 85% of its 11-20 score)")
    assert lines[1].endswith("it keeps 90% of its 11-20 score")


def test_one_long_bucket_inside_the_interval_is_not_a_fall():
    some = scores(
        bucket(11, 20, 20.0, (19.0, 21.0)),
        bucket(51, 60, 15.0, (13.0, 17.0)),
        bucket(61, None, 16.0, (14.0, 19.5)),  # overlaps 11-20's interval
    )
    (line,) = length_verdicts(comparison(model=some))
    assert line.startswith("- model loses some with length (intervals overlap its 11-20 level)")


def test_without_buckets_past_50_words_the_last_bucket_is_the_long_one():
    news = scores(
        bucket(1, 10, 8.0, (7.0, 9.0)),
        bucket(11, 20, 7.0, (6.5, 7.5)),
        bucket(21, 30, 6.0, (5.5, 6.5)),
        bucket(31, None, 5.0, (4.5, 5.5)),
    )
    (line,) = length_verdicts(comparison(model=news))
    assert "31+: 5.00 [4.5, 5.5] against 11-20: 7.00 [6.5, 7.5]" in line
    assert line.startswith("- model falls with length")


def test_a_model_without_an_11_20_bucket_gets_no_verdict():
    merged = scores(bucket(1, 30, 20.0, (19.0, 21.0)), bucket(31, None, 18.0, (17.0, 19.0)))
    merged["buckets"][0]["lo"] = 12  # no bucket holds 11-word sentences
    assert length_verdicts(comparison(model=merged)) == []


def test_a_bucket_without_an_interval_gets_no_verdict():
    thin = scores(bucket(11, 20, 20.0, (19.0, 21.0)), bucket(51, None, 10.0, (9.0, 11.0)))
    thin["buckets"][1]["bleu_ci"] = None  # too few sentences for the bootstrap
    assert length_verdicts(comparison(model=thin)) == []


def test_the_buckets_past_50_words_are_judged_pooled_when_the_report_keeps_its_texts(tmp_path):
    # 200 sentences of 15 words translated exactly, 100 of 55 and 100 of 65 words half wrong
    srcs, refs, hyps = [], [], []
    for k, words in enumerate([15] * 200 + [55] * 100 + [65] * 100):
        ref = " ".join(f"w{(k * 7 + j) % 97}" for j in range(words))
        srcs.append(" ".join(["s"] * words))
        refs.append(ref)
        hyps.append(ref if words == 15 else " ".join(ref.split()[: words // 2]))
    for name, lines in (("srcs.txt", srcs), ("hyps.txt", hyps), ("refs.txt", refs)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    per_bucket = scores(
        bucket(11, 20, 100.0, (99.0, 100.0)),
        bucket(51, 60, 40.0, (20.0, 90.0)),  # wide: alone it could not say
        bucket(61, None, 40.0, (20.0, 99.5)),
    )
    per_bucket["n"] = len(srcs)
    (line,) = length_verdicts(Comparison({"model": per_bucket}, {"model": tmp_path}))
    assert line.startswith("- model falls with length")
    assert "51+: " in line and "(51-60: 40.00 [20.0, 90.0], 61+: 40.00 [20.0, 99.5])" in line
