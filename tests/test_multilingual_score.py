"""`nmt score --tgt-lang` on a multilingual model scores a translation as `nmt translate
--tgt-lang --nbest` scored it, in both tag modes (in target mode the forced tag is the first
scored token, as in beam search); a missing or unknown language is one line, as for `nmt
translate`; a one-direction model scores as before. The models are
tests/test_multilingual_decoding.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmt.cli import main

# its module-scoped fixtures (corpus, runs) are used by name here: hence F401 and F811
from test_multilingual_decoding import TAGS, corpus, error_line, lines, runs  # noqa: F401


def nbest_entries(path: Path) -> list[tuple[int, str, float]]:
    """`INDEX ||| HYPOTHESIS ||| SCORE` lines of `nmt translate --nbest`."""
    out = []
    for line in lines(path):
        index, hyp, score = line.split(" ||| ")
        out.append((int(index), hyp, float(score)))
    return out


@pytest.mark.parametrize("tag", TAGS)
def test_score_equals_the_beams_score_of_the_same_translation(
    runs,  # noqa: F811
    corpus,  # noqa: F811
    tmp_path,
    tag,
):
    src = lines(corpus / "test.b")[:6]
    (tmp_path / "in.b").write_text("".join(s + "\n" for s in src), "utf-8")
    nbest = tmp_path / "nbest.txt"
    # alpha 1: a tag counted in the beam's length but not in the score's would show
    langs = ["--tgt-lang", "c", "--src-lang", "b", "--alpha", "1", "--device", "cpu"]
    run = str(runs[tag])
    args = ["translate", run, "-i", str(tmp_path / "in.b"), "-o", str(nbest), "--beam", "3"]
    assert main([*args, "--nbest", "3", *langs]) == 0
    entries = nbest_entries(nbest)
    assert len(entries) == 3 * len(src)
    (tmp_path / "src").write_text("".join(src[i] + "\n" for i, _, _ in entries), "utf-8")
    (tmp_path / "ref").write_text("".join(h + "\n" for _, h, _ in entries), "utf-8")
    scored = tmp_path / "scores.jsonl"
    args = ["score", run, "--src", str(tmp_path / "src"), "--ref", str(tmp_path / "ref")]
    assert main([*args, "-o", str(scored), *langs]) == 0
    rows = [json.loads(x) for x in lines(scored)]
    for (_, hyp, beam_score), row in zip(entries, rows):
        assert row["norm_score"] == pytest.approx(beam_score, abs=1e-4), hyp
        assert sum(row["token_log_probs"]) == pytest.approx(row["score"])
        # the target-mode tag is the decoder's first token, scored as the beam scored it
        assert (row["tokens"][0] == "<2c>") == (tag == "target")
        assert "<2c>" not in row["tokens"][1:]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "this model translates into a, b, c: give --tgt-lang"),
        (["--tgt-lang", "d"], "--tgt-lang d: this model translates into a, b, c, not d"),
        (["--tgt-lang", "a", "--src-lang", "d"], "--src-lang d: this model reads a, b, c, not d"),
    ],
)
def test_a_missing_or_unknown_language_is_one_line_as_for_translate(
    runs,  # noqa: F811
    corpus,  # noqa: F811
    capsys,
    args,
    message,
):
    pair = ["--src", str(corpus / "test.b"), "--ref", str(corpus / "test.a")]
    assert main(["score", str(runs["target"]), *pair, *args]) == 2
    assert error_line(capsys) == message


def test_a_one_direction_model_scores_as_before(tiny_transformer_run, tmp_path, capsys):
    from nmt.inference import load_for_decoding
    from nmt.text_translation import score_pairs

    data = tiny_transformer_run.parent / "corpus"
    srcs, refs = lines(data / "test.src"), lines(data / "test.tgt")
    m = load_for_decoding(str(tiny_transformer_run), "cpu")
    with m.autocast():  # the model's own tokenizer, as `nmt score` used it before languages
        before = score_pairs(m.model, m.tok, srcs, refs, m.cfg.decode, m.device)
    args = ["score", str(tiny_transformer_run), "--src", str(data / "test.src")]
    args += ["--ref", str(data / "test.tgt"), "--device", "cpu"]
    for langs in ([], ["--tgt-lang", "tgt", "--src-lang", "src"]):
        out = tmp_path / "scores.jsonl"
        assert main([*args, "-o", str(out), *langs]) == 0
        assert [json.loads(x) for x in lines(out)] == before
    assert main([*args, "--tgt-lang", "fr"]) == 2
    assert error_line(capsys) == (
        "--tgt-lang fr: this model translates only into tgt (it was trained for src-tgt)"
    )
