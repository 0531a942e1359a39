"""Lexical constraints where users meet them: `nmt translate --constraints FILE` puts each phrase
in its line's translation and keeps excluded ones out; every bad constraints file is one error
line naming the file and line, before anything is decoded or written; a line whose phrases
cannot fit its length limit is named in a warning; `nmt evaluate --constraints` records how many
were met; the Python API and the server take them per text (the server's mistakes are 422s
naming the field and index); the page sends what its box holds; and `nmt data constraints` draws
the same phrases from the same references and seed every time.

All on the shared tiny Transformer run (conftest.py), whose word vocabulary makes every target
word one piece."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import tiny_pairs
from nmt.cli import main
from nmt.config import VocabConfig
from nmt.data.constraints_file import (
    LineConstraints,
    appearing,
    draw_constraints,
    encode_line,
    missed_message,
)
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "nmt" / "serve" / "static"


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").split("\n")[:-1]


def write(path: Path, rows: list[str]) -> Path:
    path.write_text("".join(r + "\n" for r in rows), "utf-8")
    return path


def has(text: str, phrase: str) -> bool:
    """`phrase` occurs in `text` as whole words."""
    return f" {phrase} " in f" {text} "


def error_line(capsys) -> str:
    """The command's stderr, which must be exactly one `nmt: error:` line."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nmt: error: "), err
    return err.rstrip("\n")


def warnings(err: str) -> list[str]:
    return [line.split(" WARNING ", 1)[1] for line in err.splitlines() if " WARNING " in line]


@pytest.fixture(scope="module")
def corpus(tiny_transformer_run: Path) -> Path:
    return tiny_transformer_run.parent / "corpus"


@pytest.fixture(scope="module")
def sources(corpus: Path) -> list[str]:
    return lines(corpus / "test.src")


@pytest.fixture(scope="module")
def refs(corpus: Path) -> list[str]:
    return lines(corpus / "test.tgt")


@pytest.fixture(scope="module")
def nmt_translate(tiny_transformer_run: Path, corpus: Path):
    """`nmt translate RUN -i test.src -o OUT ARGS...` (in-process) -> its exit code."""

    def run(out: Path, *args: str, src: Path = corpus / "test.src") -> int:
        return main(["translate", str(tiny_transformer_run), "-i", str(src), "-o", str(out), *args])

    return run


@pytest.fixture(scope="module")
def plain(nmt_translate, tmp_path_factory) -> list[str]:
    """The test sources' translations without constraints."""
    out = tmp_path_factory.mktemp("plain") / "out.txt"
    assert nmt_translate(out) == 0
    return lines(out)


def room(source: str) -> int:
    """A line's length limit in target tokens: int(a * (words + EOS) + b), with the tiny run's
    decode.max_len_a 1.2 and max_len_b 5 (conftest.py); a word is one piece of its vocabulary."""
    return int(1.2 * (len(source.split()) + 1) + 5)


def too_many(source: str, refs: list[str]) -> list[str]:
    """One-word phrases, one more than the line has room for: each fits, not all of them."""
    words = sorted({w for r in refs for w in r.split()})
    assert len(words) > room(source)
    return words[: room(source) + 1]


# ---------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_a_phrase_encodes_to_the_pieces_it_has_inside_a_sentence(kind):
    """Subwords split words, so this needs a subword model, not the run's word vocabulary:
    encoded alone, a phrase gets its words' word-initial pieces ("\u2581"), as in a sentence."""
    pairs = tiny_pairs(300)
    targets = [t for _, t in pairs]
    tok = Tokenizer.build(
        VocabConfig(type=kind, size=60), [s for s, _ in pairs], targets, False, seed=1
    )
    split = 0
    for sentence in targets[:40]:
        words = sentence.split()
        phrase = " ".join(words[1:3]) or words[0]
        (ids,), _ = encode_line(tok, LineConstraints((phrase,)), 100, "test")
        whole = tok.encode_tgt([sentence])[0]
        assert any(whole[j : j + len(ids)] == ids for j in range(len(whole))), (phrase, sentence)
        assert tok.tgt.id_to_piece(ids[0]).startswith("\u2581")
        split += len(ids) > len(phrase.split())
    assert split  # some words are more than one piece: the check above has teeth


# ---------------------------------------------------------------------------- nmt translate


def test_every_phrase_drawn_from_the_references_is_in_its_translation(
    nmt_translate, refs, tmp_path, capsys
):
    drawn = draw_constraints(refs, seed=1, phrases=(1, 2), words=(1, 2))
    cons = write(tmp_path / "cons.tsv", ["\t".join(p) for p in drawn])
    assert nmt_translate(tmp_path / "out.txt", "--constraints", str(cons)) == 0
    out = lines(tmp_path / "out.txt")
    assert len(out) == len(refs) and sum(map(len, drawn)) > len(refs)
    for text, phrases in zip(out, drawn):
        assert all(has(text, p) for p in phrases), (text, phrases)
    assert warnings(capsys.readouterr().err) == []  # every line had room for its phrases


def test_excluded_phrases_never_appear_and_included_ones_do(nmt_translate, plain, refs, tmp_path):
    """JSON lines: each forbids the first word of the line's unconstrained translation; every
    other line also asks for a word of its reference."""
    rows, wanted = [], []
    for i, (text, ref) in enumerate(zip(plain, refs)):
        banned = text.split()[0]
        include = [w for w in ref.split() if w != banned][:1] if i % 2 else []
        rows.append(json.dumps({"include": include, "exclude": [banned]}))
        wanted.append((include, banned))
    cons = write(tmp_path / "cons.jsonl", rows)
    assert nmt_translate(tmp_path / "out.txt", "--constraints", str(cons)) == 0
    for text, (include, banned) in zip(lines(tmp_path / "out.txt"), wanted):
        assert text.split() and not has(text, banned), (text, banned)
        assert all(has(text, p) for p in include), (text, include)


def test_lines_without_constraints_translate_exactly_as_without_the_option(
    nmt_translate, plain, refs, tmp_path
):
    out = tmp_path / "out.txt"
    empty = write(tmp_path / "empty.tsv", [""] * len(plain))
    assert nmt_translate(out, "--constraints", str(empty)) == 0
    assert out.read_bytes() == "".join(t + "\n" for t in plain).encode()
    # In a file where another line has constraints, too (they are decoded apart).
    phrase = refs[1].split()[-1]
    some = write(tmp_path / "some.tsv", ["", phrase] + [""] * (len(plain) - 2))
    assert nmt_translate(out, "--constraints", str(some)) == 0
    got = lines(out)
    assert got[:1] + got[2:] == plain[:1] + plain[2:] and has(got[1], phrase)


def test_a_line_whose_phrases_cannot_all_fit_is_named_in_a_warning(
    nmt_translate, sources, refs, tmp_path, capsys
):
    """Every phrase alone fits line 1's limit, so the file is accepted; the line is translated
    as far as its limit goes, and the warning says how many phrases it misses."""
    phrases = too_many(sources[0], refs)
    cons = write(tmp_path / "cons.tsv", ["\t".join(phrases)] + [""] * (len(sources) - 1))
    capsys.readouterr()
    assert nmt_translate(tmp_path / "out.txt", "--constraints", str(cons)) == 0
    first = lines(tmp_path / "out.txt")[0]
    missed = sum(not has(first, p) for p in phrases)
    assert missed >= 1
    assert warnings(capsys.readouterr().err) == [
        f"{cons} line 1: {missed} of {len(phrases)} constraint phrase(s) missing from the "
        f"translation's text as whole words: the length limit (decode.max_len_a * source "
        f"tokens + decode.max_len_b) left no room for them, or a forced prefix glued one to a "
        f"longer word"
    ]


def bad_files(n: int, word: str, other: str) -> list[tuple[list[str], str]]:
    """(lines of a constraints file for n input lines, its error after `FILE `) per mistake;
    `word` and `other` are target words the vocabulary knows."""
    none = [""] * n
    return [
        (none[1:], f"line {n}: the file ends here but the input has {n} lines"),
        (none + [""], f"line {n + 1}: the input has only {n} lines"),
        (
            ["", f"{word}\t\t{other}", *none[2:]],
            "line 2: phrase 2 of 3 is empty (two TABs in a row",
        ),
        (["", "", f"{word}\t", *none[3:]], "line 3: phrase 2 of 2 is empty"),
        (
            ["qqqzz xyzzy", *none[1:]],
            # the first character no piece holds ('q'), or with every character in some
            # piece, the word the model encodes as <unk>: both start the same
            "line 1: phrase 'qqqzz xyzzy': the target vocabulary cannot spell 'q",
        ),
        ([f'{{"include": ["{word}"]', *none[1:]], "line 1: invalid JSON ("),
        (["", f'{{"includes": ["{word}"]}}', *none[2:]], "line 2: unknown key 'includes'"),
        (
            [json.dumps({"include": [f"{word} {other}"], "exclude": [other]}), *none[1:]],
            f"line 1: excluded phrase '{other}' is part of included phrase '{word} {other}'",
        ),
    ]


def test_each_bad_constraints_file_is_one_error_line_naming_file_and_line_and_no_output(
    nmt_translate, refs, tmp_path, capsys
):
    word, other = refs[0].split()[:2]
    for i, (rows, message) in enumerate(bad_files(len(refs), word, other)):
        cons, out = write(tmp_path / f"bad{i}.tsv", rows), tmp_path / f"out{i}.txt"
        capsys.readouterr()
        assert nmt_translate(out, "--constraints", str(cons)) == 2
        assert error_line(capsys).startswith(f"nmt: error: {cons} {message}"), message
        assert list(tmp_path.glob(f"*out{i}*")) == []  # no output, not even a temp file


def test_a_phrase_longer_than_its_lines_limit_is_refused(
    nmt_translate, sources, refs, tmp_path, capsys
):
    # a one-word line has room for 7 tokens: 8 one-piece words are within decode.max_phrase_words
    src = write(tmp_path / "src.txt", ["", "", sources[0].split()[0]])
    limit = room(sources[0].split()[0])
    words = " ".join(" ".join(refs).split()[: limit + 1])
    cons = write(tmp_path / "cons.tsv", ["", "", words])
    assert nmt_translate(tmp_path / "out.txt", "--constraints", str(cons), src=src) == 2
    assert error_line(capsys) == (
        f"nmt: error: {cons} line 3: phrase {words!r} is {limit + 1} target tokens, longer than "
        f"the line's length limit of {limit} (decode.max_len_a * source tokens + "
        f"decode.max_len_b)"
    )
    assert not (tmp_path / "out.txt").exists()


def test_constraints_with_sampling_or_on_a_blank_line_are_refused(
    nmt_translate, sources, refs, tmp_path, capsys
):
    src = write(tmp_path / "in.txt", [sources[0], ""])
    word = refs[0].split()[0]
    cons = write(tmp_path / "cons.tsv", [word, word])
    out = tmp_path / "out.txt"
    assert nmt_translate(out, "--constraints", str(cons), src=src) == 2
    assert error_line(capsys) == (
        f"nmt: error: {cons} line 2: constraints for a blank input, which is not translated"
    )
    write(cons, [word, ""])
    assert nmt_translate(out, "--constraints", str(cons), "--sample", src=src) == 2
    assert "--constraints needs beam search" in error_line(capsys)
    assert not out.exists()


# ---------------------------------------------------------------------------- nmt evaluate


def test_evaluate_records_how_many_phrases_were_given_and_met(
    tiny_transformer_run, corpus, sources, refs, tmp_path, capsys
):
    """Phrases drawn from the references (some lines get none), and on line 1 one more phrase
    than its limit has room for, so the record has a miss to count."""
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    rows = ["\t".join(p) for p in draw_constraints(refs, seed=2, phrases=(0, 2), words=(1, 2))]
    rows[0] = "\t".join(too_many(sources[0], refs))
    cons = write(tmp_path / "cons.tsv", rows)
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    capsys.readouterr()
    assert main(["evaluate", str(run), *files, "--constraints", str(cons), "--bootstrap", "0"]) == 0
    printed = capsys.readouterr()
    report = run / "eval_file_test_beam3_constrained_cons"
    record = json.loads((report / "scores.json").read_text())["constraints"]
    hyps = lines(report / "hyps.txt")
    given = [r.split("\t") if r else [] for r in rows]
    constrained = sum(1 for g in given if g)
    met = sum(has(h, p) for h, g in zip(hyps, given) for p in g)
    all_met = sum(1 for h, g in zip(hyps, given) if g and all(has(h, p) for p in g))
    assert record == {
        "file": str(cons.resolve()),
        "lines": constrained,
        "phrases": sum(map(len, given)),
        "met": met,
        "lines_all_met": all_met,
        "share_met": round(all_met / constrained, 4),
        "excluded": 0,
        "excluded_in_output": 0,
    }
    assert met < record["phrases"] and all_met < constrained < len(rows)
    assert (
        f"constraints: {met} of {record['phrases']} phrases met; {all_met} of {constrained} "
        f"constrained lines have all of theirs ({100 * record['share_met']:.1f}%)"
    ) in printed.out
    assert f"{cons} line 1: " in printed.err  # the miss is named as nmt translate names it
    assert not (run / "eval_file_test_beam3").exists()  # beside the plain report, not over it


def test_the_drawn_study_with_excluded_words_keeps_every_one_out_of_the_text(
    tiny_transformer_run, corpus, plain, refs, tmp_path, capsys
):
    """`nmt data constraints --exclude-from` adds one word per line of the unconstrained output
    (never inside a drawn phrase) in the JSON form; `nmt evaluate` counts those words in its
    output's text: none."""
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    hyps = write(tmp_path / "plain.txt", plain)
    cons = tmp_path / "both.jsonl"
    draw = ["data", "constraints", "--ref", str(corpus / "test.tgt"), "--max-words", "1"]
    assert main([*draw, "--exclude-from", str(hyps), "-o", str(cons)]) == 0
    rows = [json.loads(r) for r in lines(cons)]
    excluded = [r["exclude"][0] for r in rows if "exclude" in r]
    assert len(rows) == len(refs) and len(excluded) > len(refs) // 2
    for r, text in zip(rows, plain):
        if "exclude" in r:  # a word of the plain output, in no drawn phrase
            (word,) = r["exclude"]
            assert has(text, word) and not any(word in p for p in r["include"])
    assert f", {len(excluded)} excluded words (seed 1)" in capsys.readouterr().err
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    assert main(["evaluate", str(run), *files, "--constraints", str(cons), "--bootstrap", "0"]) == 0
    report = run / "eval_file_test_beam3_constrained_both"
    record = json.loads((report / "scores.json").read_text())["constraints"]
    assert (record["excluded"], record["excluded_in_output"]) == (len(excluded), 0)
    assert f"; 0 of {len(excluded)} excluded phrases in the output" in capsys.readouterr().out
    out = lines(report / "hyps.txt")
    assert not any(has(t, r["exclude"][0]) for t, r in zip(out, rows) if "exclude" in r)
    assert appearing(plain, [r.get("exclude", []) for r in rows]) == len(excluded)


def test_exclusions_from_a_file_of_another_length_are_refused(corpus, tmp_path, capsys):
    short = write(tmp_path / "short.txt", ["a dog"])
    args = ["data", "constraints", "--ref", str(corpus / "test.tgt"), "--exclude-from", str(short)]
    assert main([*args, "-o", str(tmp_path / "c.jsonl")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"nmt: error: --exclude-from {short}: 1 lines, but --ref ")
        and err.count("\n") == 1
    )
    assert not (tmp_path / "c.jsonl").exists()


def test_evaluate_with_a_bad_constraints_file_writes_no_report(
    tiny_transformer_run, corpus, refs, tmp_path, capsys
):
    run = Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))
    cons = write(tmp_path / "cons.tsv", ["", "qqqzz"] + [""] * (len(refs) - 2))
    files = ["--src", str(corpus / "test.src"), "--ref", str(corpus / "test.tgt")]
    assert main(["evaluate", str(run), *files, "--constraints", str(cons)]) == 2
    assert error_line(capsys).startswith(f"nmt: error: {cons} line 2: phrase 'qqqzz': the target")
    assert list(run.glob("eval_*")) == []


# ---------------------------------------------------------------------------- Python API


@pytest.fixture(scope="module")
def translator(tiny_transformer_run):
    from nmt.api import Translator

    return Translator.load(tiny_transformer_run)


def test_the_api_takes_a_flat_list_for_a_string_and_one_entry_per_text_for_a_list(
    translator, sources, refs, plain
):
    two_words = " ".join(refs[0].split()[:2])
    one = translator.translate(sources[0], constraints=[two_words])
    assert isinstance(one, str) and has(one, two_words) and one.unmet == 0
    assert one.as_dict()["unmet"] == 0 and one.warnings == []
    free = translator.translate(sources[0])
    assert free == plain[0] and free.unmet is None and free.as_dict()["unmet"] is None
    word, banned = refs[0].split()[-1], plain[1].split()[0]
    a, b, c = translator.translate(
        sources[:3], constraints=[[word], {"include": [word], "exclude": [banned]}, None]
    )
    assert has(a, word) and has(b, word) and not has(b, banned) and c == plain[2]
    assert (a.unmet, b.unmet, c.unmet) == (0, 0, None)
    assert translator.translate(sources[:2], constraints=[[], None]) == plain[:2]


def test_the_api_says_which_text_missed_phrases(translator, sources, refs):
    phrases = too_many(sources[0], refs)
    r = translator.translate(sources[0], constraints=phrases)
    assert r.unmet == sum(not has(r, p) for p in phrases) >= 1
    assert r.warnings == [missed_message(r.unmet, len(phrases))]


@pytest.mark.parametrize(
    "constraints, message",
    [
        ([["he"]], "constraints: 1 entries for 2 texts"),
        ("he", "constraints: expected one entry per text"),
        (["he", "shi"], "constraints[0]: expected a list of phrases or an object"),
        ([["he"], ["qqqzz"]], "constraints[1]: phrase 'qqqzz': the target vocabulary cannot"),
        ([["he", " "], None], "constraints[0]: phrase 2: expected non-empty text"),
        ([{"exclude": [3]}, None], "constraints[0]: 'exclude': phrase 1: expected non-empty"),
        ([{"only": ["he"]}, None], "constraints[0]: unknown key 'only'"),
    ],
)
def test_bad_api_constraints_are_nmt_errors_naming_the_text(
    translator, sources, constraints, message
):
    with pytest.raises(NmtError) as e:
        translator.translate(sources[:2], constraints=constraints)
    assert str(e.value).startswith(message), str(e.value)


def test_the_api_refuses_constraints_with_sampling(translator, sources):
    from nmt.api import Sampling

    with pytest.raises(NmtError, match="constraints need beam search"):
        translator.translate(sources[0], constraints=["he"], sampling=Sampling(seed=1))


# ---------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def client(translator):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.serve.app import Limits, create_app

    with TestClient(create_app(translator, Limits(max_sentences=8))) as c:
        yield c


def post(client, body: dict) -> tuple[int, dict]:
    r = client.post("/v1/translate", json=body)
    return r.status_code, r.json()


def test_the_server_takes_constraints_per_text(client, sources, refs, plain):
    word, banned = refs[0].split()[-1], plain[1].split()[0]
    body = {"text": sources[:3], "constraints": [[word], {"exclude": [banned]}, []]}
    status, answer = post(client, body)
    assert status == 200, answer
    a, b, c = answer["translations"]
    assert has(a["text"], word) and not has(b["text"], banned) and c["text"] == plain[2]
    assert (a["unmet"], b["unmet"], c["unmet"]) == (0, 0, None)
    status, answer = post(client, {"text": sources[:1]})
    assert answer["translations"][0]["unmet"] is None


BAD = [
    ({"constraints": [["he"]]}, "constraints: 1 entries for 2 texts"),
    ({"constraints": "he"}, "constraints: input should be a valid list"),
    ({"constraints": [["he"], 7]}, "constraints.1: expected a list of phrases or an object"),
    ({"constraints": [["he"], ["qqqzz"]]}, "constraints.1: phrase 'qqqzz': the target vocab"),
    ({"constraints": [["he", ""], []]}, "constraints.0: phrase 2: expected non-empty text"),
    ({"constraints": [{"include": "he"}, []]}, "constraints.0: 'include': expected a list"),
    ({"constraints": [{"also": []}, []]}, "constraints.0: unknown key 'also'"),
    ({"constraints": [[" ".join(["he"] * 9)], []]}, "constraints.0: phrase 'he he"),
    ({"constraints": [["he"], []], "sample": True}, "constraints need beam search"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[m for _, m in BAD])
def test_bad_constraints_are_422s_naming_the_field_and_index(client, sources, extra, message):
    status, answer = post(client, {"text": sources[:2], **extra})
    assert status == 422 and set(answer) <= {"error", "limit"}
    assert answer["error"].startswith(message), answer["error"]


# ---------------------------------------------------------------------------- the page


def javascript_runtime() -> str | None:
    """node, else the node Playwright bundles (CI installs Playwright for the browser test)."""
    if shutil.which("node"):
        return shutil.which("node")
    try:
        import playwright
    except ImportError:
        return None
    bundled = Path(playwright.__file__).parent / "driver" / "node"
    return str(bundled) if bundled.is_file() else None


def page_constraints(texts: list[str], typed: str) -> list[list[str]] | None:
    """The `constraints` the page's constraints.js builds from its box, run in Node where there
    is one; without, the page's stated rule (comma separated, trimmed, empty items dropped, the
    same phrases for every text, no field when nothing is typed), so the request is checked
    against the server either way."""
    node = javascript_runtime()
    if node is None:
        phrases = [p.strip() for p in typed.split(",") if p.strip()]
        return [phrases for _ in texts] if phrases else None
    script = (
        f"const c = require({json.dumps(str(STATIC / 'constraints.js'))});"
        f"console.log(JSON.stringify(c.constraintsFor({json.dumps(texts)}, "
        f"{json.dumps(typed)}) ?? null));"
    )
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_page_has_a_phrase_box_and_sends_its_phrases_for_every_sentence(client, sources, refs):
    """The request the page builds (constraints.js, run in Node where there is one: the browser
    test, tests/test_browser.py, needs chromium), sent to the server, which meets its phrases."""
    page = (STATIC / "index.html").read_text("utf-8")
    assert 'id="constraints"' in page and "comma" in page
    assert page.index("/static/constraints.js") < page.index("/static/app.js")
    assert 'constraintsFor(texts, $("constraints").value)' in (STATIC / "app.js").read_text()
    assert page_constraints(["a"], " , ") is None  # nothing typed: the request as before
    one, two = refs[0].split()[-1], " ".join(refs[1].split()[:2])
    constraints = page_constraints(sources[:2], f" {one} , {two},, ")
    assert constraints == [[one, two], [one, two]]
    status, answer = post(client, {"text": sources[:2], "constraints": constraints})
    assert status == 200, answer
    for t in answer["translations"]:
        assert has(t["text"], one) and has(t["text"], two) and t["unmet"] == 0


# ---------------------------------------------------------------------------- nmt data constraints


def in_order_apart(ref: str, phrases: list[str]) -> bool:
    """Each phrase is consecutive words of the reference, after the end of the one before."""
    words, at = ref.split(), 0
    for p in map(str.split, phrases):
        starts = [s for s in range(at, len(words) - len(p) + 1) if words[s : s + len(p)] == p]
        if not starts:
            return False
        at = starts[0] + len(p)
    return True


def test_the_draw_is_the_same_for_the_same_file_and_seed_and_keeps_its_bounds(
    corpus, refs, tmp_path, capsys
):
    args = ["data", "constraints", "--ref", str(corpus / "test.tgt"), "--min-phrases", "2"]
    args += ["--max-phrases", "3", "--min-words", "2", "--max-words", "3"]
    one, two, other = tmp_path / "one.tsv", tmp_path / "two.tsv", tmp_path / "other.tsv"
    for out, seed in ((one, "1"), (two, "1"), (other, "2")):
        assert main([*args, "--seed", seed, "-o", str(out)]) == 0
    assert one.read_bytes() == two.read_bytes() and one.read_bytes() != other.read_bytes()
    drawn = [r.split("\t") if r else [] for r in lines(one)]
    assert len(drawn) == len(refs)
    for ref, phrases in zip(refs, drawn):
        assert len(phrases) <= 3 and all(2 <= len(p.split()) <= 3 for p in phrases)
        if len(ref.split()) >= 6:  # the first phrase (<= 3 words) leaves 2 words on a side
            assert len(phrases) >= 2, (ref, phrases)
        assert in_order_apart(ref, phrases), (ref, phrases)
    summary = f"{sum(map(len, drawn))} phrases on {sum(1 for p in drawn if p)} of {len(refs)} lines"
    assert f"{summary} (seed 1) -> {one}" in capsys.readouterr().err


def test_short_lines_get_fewer_phrases_and_bad_bounds_are_refused(tmp_path, capsys):
    refs = ["a b c d e f g h", "one", "", "x y"]
    drawn = draw_constraints(refs, seed=3, phrases=(3, 3), words=(2, 2))
    assert len(drawn[0]) == 3 and drawn[1:] == [[], [], ["x y"]]
    assert draw_constraints(refs, 3, (3, 3), (2, 2)) == drawn
    # A line's draw depends on the seed, its place and its own words only.
    assert draw_constraints(refs[:1] + ["other words here"], 3, (3, 3), (2, 2))[0] == drawn[0]
    ref = write(tmp_path / "ref.txt", refs)
    bounds = ["--min-words", "3", "--max-words", "2"]
    assert main(["data", "constraints", "--ref", str(ref), *bounds]) == 2
    assert "1 <= --min-words <= --max-words" in error_line(capsys)
