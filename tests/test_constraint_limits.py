"""Lexical constraints that could never work, or would cost more than a request may, are refused
before any work, in one line naming the limit or the character; "met" means found in the
output's text as whole words everywhere it is reported; a forced prefix that continues a
phrase's word leaves a result, not a traceback; and the constrained search's tensors stay
under a fixed budget however a batch is made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import tiny_pairs
from nmt.cli import main
from nmt.config import DecodeConfig, VocabConfig
from nmt.data.batching import pad_batch
from nmt.data.constraints_file import LimitExceeded, LineConstraints, encode_line, holds
from nmt.data.tokenizer import EOS, Tokenizer
from nmt.decode import CONSTRAINT_BUDGET, _within_budget
from nmt.errors import NmtError
from nmt.search.beam import beam_search
from nmt.search.constraints import Constraints
from nmt.search.rules import Rules
from nmt.text_translation import encode_constraints
from test_constraints import ScriptModel

WORDS = (
    "a man in a t-shirt and a well-known dog walk near the construction site with "
    "construct cafe coffee known shirt dogs run big small red house tree"
).split()


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    """A character-level-capable subword model of English-like text (no é, no ☃, no 中)."""
    lines = [" ".join(WORDS[i % len(WORDS) :] + WORDS[: i % len(WORDS)]) for i in range(200)]
    lines += [s for s, _ in tiny_pairs(200)]
    cfg = VocabConfig(type="unigram", size=120, character_coverage=1.0)
    return Tokenizer.build(cfg, lines, lines, False, seed=1)


def error(call) -> str:
    with pytest.raises(NmtError) as e:
        call()
    return str(e.value)


# ---------------------------------------------------------------------------- what is refused


@pytest.mark.parametrize(
    "phrase, named",
    [("中文", "中"), ("café☃", "é"), ("cafe☃", "☃"), ("a dog☃", "☃")],
)
@pytest.mark.parametrize("kind", ["include", "exclude"])
def test_a_phrase_with_a_character_the_vocabulary_cannot_spell_is_refused_naming_it(
    tok, phrase, named, kind
):
    c = LineConstraints(**{kind: (phrase,)})
    message = error(lambda: encode_line(tok, c, 100, "line 1"))
    assert message.startswith(f"line 1: phrase {phrase!r}: the target vocabulary cannot spell")
    assert f"{named!r}" in message and "\n" not in message


def test_an_excluded_phrase_inside_an_included_one_as_text_is_refused(tok):
    for include, exclude in [("t-shirt", "shirt"), ("well-known", "known"), ("a dog", "dog")]:
        c = LineConstraints((include,), (exclude,))
        assert error(lambda: encode_line(tok, c, 100, "line 3")) == (
            f"line 3: excluded phrase {exclude!r} is part of included phrase {include!r}; the "
            f"two can never both hold"
        )
    # inside a longer word it is not the word: both can hold
    pos, neg = encode_line(tok, LineConstraints(("construction",), ("construct",)), 100, "x")
    assert pos and neg


@pytest.mark.parametrize("include, exclude", [("shirts", "shirt"), ("weyos", "weyo")])
def test_an_excluded_phrase_whose_pieces_run_inside_an_included_ones_is_refused(
    tok, include, exclude
):
    # "shirts" is "▁shirt s": the search bans the excluded pieces even inside a longer word,
    # so the included phrase could never be written (the text check alone let this through).
    inc, exc = tok.tgt.encode([include, exclude])
    assert inc[: len(exc)] == exc and len(inc) > len(exc)
    c = LineConstraints((include,), (exclude,))
    assert error(lambda: encode_line(tok, c, 100, "line 4")) == (
        f"line 4: excluded phrase {exclude!r} is part of included phrase {include!r}; the "
        f"two can never both hold"
    )


def test_a_word_the_vocabulary_cannot_spell_is_named_short_however_long(tmp_path):
    lines = [s for s, _ in tiny_pairs(200)]
    words = Tokenizer.build(VocabConfig(type="word", size=60), lines, lines, False, seed=1)
    letters = sorted({ch for line in lines for ch in line if ch.isalpha()})
    word = "".join(letters[i % len(letters)] for i in range(80_000))  # known letters, no word
    message = error(lambda: encode_line(words, LineConstraints((word,)), 100, "constraints.0"))
    assert "the target vocabulary cannot spell" in message and len(message) < 300


@pytest.mark.parametrize(
    "c, limit",
    [
        (LineConstraints(tuple(f"dog {i}" for i in range(17))), "decode.max_phrases"),
        (LineConstraints(("dog",) * 9, ("cat",) * 8), "decode.max_phrases"),
        (LineConstraints((" ".join(["dog"] * 9),)), "decode.max_phrase_words"),
        (LineConstraints((), (" ".join(["run"] * 9),)), "decode.max_phrase_words"),
    ],
)
def test_more_phrases_or_words_than_the_limits_are_refused_naming_the_limit(tok, c, limit):
    with pytest.raises(LimitExceeded) as e:
        encode_line(tok, c, 100, "line 2")
    assert e.value.limit == limit and f"({limit})" in str(e.value)
    assert str(e.value).startswith("line 2: ")


def test_a_phrase_of_more_tokens_than_the_limit_is_refused(tok):
    c = LineConstraints(("construction site",))
    ids, _ = encode_line(tok, c, 100, "x")
    short = DecodeConfig(max_phrase_tokens=len(ids[0]) - 1)
    with pytest.raises(LimitExceeded) as e:
        encode_line(tok, c, 100, "line 1", short)
    assert e.value.limit == "decode.max_phrase_tokens"


def test_every_line_is_held_to_the_limits_before_any_phrase_is_encoded(tok, monkeypatch):
    texts = ["a dog", "a man"]
    lines = [LineConstraints(("dog",)), LineConstraints(tuple(f"w{i}" for i in range(40)))]

    def no_encoding(*_):
        raise AssertionError("a phrase was encoded before every line was checked")

    monkeypatch.setattr(type(tok.tgt), "encode", no_encoding)
    message = error(lambda: encode_constraints(tok, texts, lines, DecodeConfig(), "line {}".format))
    assert message.startswith("line 1: 40 phrases, more than the limit of 16 per sentence")


# ---------------------------------------------------------------------------- met on text


@pytest.mark.parametrize(
    "text, phrase, found",
    [
        ("a dog runs", "dog", True),
        ("a dog.", "dog", True),
        ("dog", "dog", True),
        ("two dogs run", "dog", False),  # glued to a letter after
        ("hotdog stand", "dog", False),  # ... and before
        ("dog2 runs", "dog", False),  # ... and to a digit
        ("a t-shirt", "shirt", True),  # a hyphen is a boundary
        ("我爱中文课", "中文", True),  # a script written without spaces: any occurrence
        ("ฉันรักแมว", "แมว", True),
        ("a big dog", "big dog", True),
        ("a big  dog", "big dog", False),
        ("anything", "", False),
    ],
)
def test_a_phrase_is_met_where_the_text_holds_it_as_whole_words(text, phrase, found):
    assert holds(text, phrase) is found


# ---------------------------------------------------------------------------- the search


def test_a_forced_prefix_that_continues_a_phrases_word_leaves_a_result_not_an_error():
    # The phrase is [5] ("dog") and 6 continues a word ("s"); the prefix forces 5 6 ("dogs").
    # Before, the word-continuation ban removed the forced 6: every row at -inf, no hypothesis.
    model = ScriptModel([5, 6, 7, 5, 8, EOS])
    src, mask = pad_batch([[9, EOS]])
    cons = Constraints.build([[[5]]], joiners=[6, 7])
    (hyps,) = beam_search(
        model, src, mask, beam=3, nbest=3, rules=Rules.build([[5, 6]]), constraints=cons
    )
    assert hyps
    for h in hyps:
        assert h.tokens[:2] == [5, 6]  # the prefix as forced
        later = [i for i in range(2, len(h.tokens)) if h.tokens[i] == 5]
        whole = [i for i in later if i + 1 == len(h.tokens) or h.tokens[i + 1] not in (6, 7)]
        assert (h.unmet == 0) == bool(whole), h.tokens  # met only by a later whole "dog"


def test_the_constrained_search_is_cut_into_batches_under_its_tensor_budget():
    positive = [[[4 + j] * 24 for j in range(16)] for _ in range(300)]  # the default limits
    (batch,) = [list(range(300))]
    parts = list(_within_budget([batch], positive, 16))
    assert sum(parts, []) == batch and len(parts) > 1
    M = 3 * 16 + 2 * 16 * 16
    assert all(len(p) * M * 16 * 24 <= CONSTRAINT_BUDGET for p in parts)
    assert list(_within_budget([batch], None, 16)) == [batch]  # unconstrained: as it was


# ---------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def corpus(tiny_transformer_run: Path) -> Path:
    return tiny_transformer_run.parent / "corpus"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nmt: error: "), err
    return err.rstrip("\n")


def test_two_thousand_phrases_on_one_sentence_are_one_line_before_any_decoding(
    tiny_transformer_run, corpus, tmp_path, capsys
):
    words = (corpus / "test.tgt").read_text("utf-8").split()
    src = tmp_path / "in.txt"
    src.write_text("les saton midos\n", "utf-8")
    cons = tmp_path / "cons.tsv"
    cons.write_text("\t".join(words[i % len(words)] for i in range(2000)) + "\n", "utf-8")
    argv = ["translate", str(tiny_transformer_run), "-i", str(src), "-o", str(tmp_path / "o")]
    assert main([*argv, "--constraints", str(cons)]) == 2
    assert one_error_line(capsys) == (
        f"nmt: error: {cons} line 1: 2000 phrases, more than the limit of 16 per sentence "
        f"(decode.max_phrases)"
    )


@pytest.mark.parametrize(
    "command, flag, line, message",
    [
        (
            "translate",
            "--max-phrases",
            "{}\t{}\t{}",
            "3 phrases, more than the limit of 2 per sentence",
        ),
        ("evaluate", "--max-phrase-words", "{} {} {}", "has 3 words, more than the limit of 2"),
        ("translate", "--max-phrase-tokens", "{} {} {}", "more than the limit of 2"),
    ],
)
def test_the_cli_changes_each_constraint_limit_over_the_runs_config(
    tiny_transformer_run, corpus, tmp_path, capsys, command, flag, line, message
):
    src, cons = tmp_path / "in.txt", tmp_path / "cons.tsv"
    src.write_text("les saton midos\n", "utf-8")
    words = list(dict.fromkeys((corpus / "test.tgt").read_text("utf-8").split()))[:3]
    cons.write_text(line.format(*words) + "\n", "utf-8")
    files = ["-i", str(src), "-o", str(tmp_path / "o")]
    if command == "evaluate":
        files = ["--src", str(src), "--ref", str(src), "--report", str(tmp_path / "r")]
    argv = [command, str(tiny_transformer_run), *files, "--constraints", str(cons)]
    assert main([*argv, flag, "2"]) == 2
    assert message in one_error_line(capsys)
    assert main([*argv, flag, "16"]) == 0  # within the raised limit (the run says 16, 8, 24)


def test_more_than_256_phrases_per_sentence_is_refused_at_startup_in_one_line(
    tiny_transformer_run, tmp_path, capsys
):
    src = tmp_path / "in.txt"
    src.write_text("les saton midos\n", "utf-8")
    assert (
        main(["translate", str(tiny_transformer_run), "-i", str(src), "--max-phrases", "257"]) == 2
    )
    line = one_error_line(capsys)
    assert "decode.max_phrases" in line and "256" in line


def test_serve_takes_the_same_constraint_limit_options_and_a_request_limit_of_64():
    import argparse

    from nmt.cli import serve, translate

    parsers = {}
    for module in (serve, translate):
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub)
        (parsers[module],) = sub.choices.values()
    flags = ("--max-phrases", "--max-phrase-words", "--max-phrase-tokens")
    for p in parsers.values():
        assert all(f in p._option_string_actions for f in flags)
    assert parsers[serve].parse_args(["run"]).max_request_phrases == 64


def test_running_out_of_memory_is_one_line_naming_what_to_lower(
    tiny_transformer_run, tmp_path, capsys, monkeypatch
):
    import nmt.jobs.translate

    def out_of_memory(*_, **__):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1")

    monkeypatch.setattr(nmt.jobs.translate, "translate", out_of_memory)
    src = tmp_path / "in.txt"
    src.write_text("les saton midos\n", "utf-8")
    assert main(["translate", str(tiny_transformer_run), "-i", str(src)]) == 1
    line = one_error_line(capsys)
    assert line.startswith("nmt: error: out of memory while decoding; lower --batch-tokens")


def test_each_constraints_file_gets_its_own_report_never_another_files(
    tiny_transformer_run, corpus, tmp_path
):
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    refs = (corpus / "test.tgt").read_text("utf-8").splitlines()
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    made = []
    for where, words in [("a/terms.tsv", 1), ("b/other.tsv", 2), ("c/terms.tsv", 2)]:
        path = tmp_path / where
        path.parent.mkdir()
        path.write_text("".join(" ".join(r.split()[:words]) + "\n" for r in refs), "utf-8")
        argv = ["evaluate", str(run), *files, "--constraints", str(path), "--bootstrap", "0"]
        assert main(argv) == 0
        reports = {p for p in run.glob("eval_*_constrained*") if p not in made}
        (new,) = reports - set(made)  # a new directory each time: none overwritten
        made.append(new)
        scores = json.loads((new / "scores.json").read_text())
        assert scores["constraints"]["file"] == str(path.resolve())
    assert made[0].name == "eval_file_test_beam3_constrained_terms"
    assert made[1].name == "eval_file_test_beam3_constrained_other"
    assert made[2].name.startswith("eval_file_test_beam3_constrained_terms_")


def test_rerunning_a_constraints_file_writes_into_its_own_report_and_stems_never_mix(
    tiny_transformer_run, corpus, tmp_path
):
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    refs = (corpus / "test.tgt").read_text("utf-8").splitlines()
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    wrote = []
    for where in ["e1/c.tsv", "e2/c.tsv", "e1/c.tsv", "e1/cat.tsv"]:
        path = tmp_path / where
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(r.split()[0] + "\n" for r in refs), "utf-8")
        argv = ["evaluate", str(run), *files, "--constraints", str(path), "--bootstrap", "0"]
        assert main(argv) == 0
        (report,) = [
            p
            for p in run.glob("eval_*_constrained*")
            if json.loads((p / "scores.json").read_text())["constraints"]["file"]
            == str(path.resolve())
        ]
        wrote.append(report.name)
    assert wrote[0] == "eval_file_test_beam3_constrained_c"
    assert wrote[1].startswith("eval_file_test_beam3_constrained_c_")  # another c.tsv
    assert wrote[2] == wrote[0]  # the first file again: its own report, not a new one
    assert wrote[3] == "eval_file_test_beam3_constrained_cat"  # c's reports don't hold cat's
    assert len(list(run.glob("eval_*_constrained*"))) == 3


def test_a_checkpoint_other_than_best_pt_gets_its_own_report_beside_best_pts(
    tiny_transformer_run, corpus, tmp_path
):
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    assert main(["evaluate", str(run), *files, "--bootstrap", "0"]) == 0
    shutil.copy(run / "best.pt", run / "averaged.pt")  # as nmt average -o RUN/averaged.pt
    assert main(["evaluate", str(run / "averaged.pt"), *files, "--bootstrap", "0"]) == 0
    best = json.loads((run / "eval_file_test_beam3" / "scores.json").read_text())
    averaged = json.loads((run / "eval_file_test_beam3_averaged" / "scores.json").read_text())
    assert Path(best["checkpoint"]).name == "best.pt"  # not overwritten
    assert Path(averaged["checkpoint"]).name == "averaged.pt"
