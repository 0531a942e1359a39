"""Decoding a multilingual model (data.directions): `nmt translate --tgt-lang` writes the language
asked for, and refuses in one line when it is missing or unknown; `nmt evaluate --direction`
scores one direction (trained or zero-shot) and, without it, every trained direction with a
table of them all; `--pivot` translates in two passes; the off-target rate counts outputs a
language identifier does not read as the target; `Translator.translate(tgt_lang=...)` and the
server's `tgt_lang` field follow the same rules; the page's language menu is for multilingual
models only.

The toy corpus has three languages with disjoint words: b respells a's words (reversed, then
'o'), c writes them reversed behind a 'k'. A stub identifier reads them by their spelling;
`langid` itself is tested on real English, French and German sentences. `Translator.translate(
pivot=...)` and the server's `pivot` field translate through a pivot as `nmt translate --pivot`
does; `nmt evaluate` takes the directions from the run, whatever data it scores on."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import DIRECTIONS, TAGS
from nmt.cli import main
from nmt.errors import NmtError


def toy_language(text: str) -> str:
    """The stub identifier's reading of one text: the language most of its words are spelled in."""
    votes = ["c" if w.startswith("k") else "b" if w.endswith("o") else "a" for w in text.split()]
    return max("abc", key=votes.count)


def toy_identifier(texts: list[str]) -> list[str]:
    return [toy_language(t) for t in texts]


@pytest.fixture(scope="module")
def corpus(three_way_corpus: Path) -> Path:
    return three_way_corpus


@pytest.fixture(scope="module")
def runs(multilingual_runs: dict[str, Path]) -> dict[str, Path]:
    return multilingual_runs


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines()


def share_in(texts: list[str], lang: str) -> float:
    """The share of the words of `texts` the stub reads as `lang`."""
    words = [w for t in texts for w in t.split()]
    return sum(toy_language(w) == lang for w in words) / max(1, len(words))


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nmt: error: "), err
    return err.strip()[len("nmt: error: ") :]


@pytest.fixture
def stub_identifier(monkeypatch):
    """`nmt evaluate`'s default identifier replaced by the stub (langid knows no toy language)."""
    monkeypatch.setattr(
        "nmt.jobs.evaluate.default_identifier", lambda langs: (toy_identifier, "toy spelling")
    )


# ---------------------------------------------------------------------------------- translate


@pytest.mark.parametrize("tag", TAGS)
def test_translate_writes_the_language_tgt_lang_names(runs, corpus, tmp_path, tag):
    for lang in ("a", "c"):
        out = tmp_path / f"out.{lang}"
        args = ["translate", str(runs[tag]), "-i", str(corpus / "test.b"), "-o", str(out)]
        assert main([*args, "--tgt-lang", lang, "--src-lang", "b"]) == 0
        assert len(lines(out)) == 16
        assert share_in(lines(out), lang) > 0.9, lines(out)


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "this model translates into a, b, c: give --tgt-lang"),
        (["--tgt-lang", "d"], "--tgt-lang d: this model translates into a, b, c, not d"),
        (
            ["--tgt-lang", "<2c>"],
            "--tgt-lang <2c>: this model translates into a, b, c, not <2c> (give the language "
            "key c, not its tag)",
        ),
        (["--tgt-lang", ">>a<<"], "--tgt-lang >>a<<: this model translates into a, b, c, not"),
        (["--tgt-lang", "a", "--src-lang", "d"], "--src-lang d: this model reads a, b, c, not d"),
        (["--tgt-lang", "c", "--pivot", "c"], "--pivot c: the pivot must differ from the"),
        (["--tgt-lang", "c", "--pivot", "d"], "--pivot d: this model translates into a, b, c"),
    ],
)
def test_a_missing_or_unknown_language_is_one_line(runs, corpus, capsys, args, message):
    code = main(["translate", str(runs["source"]), "-i", str(corpus / "test.b"), *args])
    assert code == 2
    assert error_line(capsys).startswith(message)


def test_a_one_direction_model_takes_its_own_target_language_only(
    tiny_transformer_run, tmp_path, capsys
):
    src = tiny_transformer_run.parent / "corpus" / "test.src"
    plain, named = tmp_path / "plain.txt", tmp_path / "named.txt"
    assert main(["translate", str(tiny_transformer_run), "-i", str(src), "-o", str(plain)]) == 0
    args = ["translate", str(tiny_transformer_run), "-i", str(src), "-o", str(named)]
    assert main([*args, "--tgt-lang", "tgt"]) == 0
    assert lines(named) == lines(plain)
    assert main([*args, "--tgt-lang", "fr"]) == 2
    assert error_line(capsys) == (
        "--tgt-lang fr: this model translates only into tgt (it was trained for src-tgt)"
    )
    assert main([*args, "--pivot", "en"]) == 2
    assert "a pivot needs a multilingual model" in error_line(capsys)


@pytest.mark.parametrize("tag", TAGS)
def test_pivot_translates_through_a_trained_language(runs, corpus, tmp_path, capsys, tag):
    out = tmp_path / "out.txt"
    args = ["translate", str(runs[tag]), "-i", str(corpus / "test.a"), "-o", str(out)]
    assert main([*args, "--tgt-lang", "c", "--src-lang", "a", "--pivot", "b"]) == 0
    assert "a -> b -> c: two passes" in capsys.readouterr().err
    assert share_in(lines(out), "c") > 0.9  # b -> c is a trained direction
    assert main([*args, "--tgt-lang", "c", "--pivot", "b", "--alignment"]) == 2
    assert error_line(capsys) == "--alignment and --constraints cannot be used with --pivot"


@pytest.mark.parametrize("tag", TAGS)
def test_alignments_leave_the_language_tag_out(runs, corpus, tmp_path, tag):
    out = tmp_path / "out.txt"
    args = ["translate", str(runs[tag]), "-i", str(corpus / "test.b"), "-o", str(out)]
    assert main([*args, "--tgt-lang", "a", "--alignment"]) == 0
    rows = [json.loads(x) for x in lines(Path(f"{out}.align.json"))]
    for src, row, hyp in zip(lines(corpus / "test.b"), rows, lines(out)):
        assert row["src"] == src.split() and row["tgt"] == hyp.split()
        assert len(row["attention"]) == len(row["tgt"])
        assert all(len(r) == len(row["src"]) for r in row["attention"])


def test_a_tag_typed_in_the_input_stays_text(runs):
    from nmt.api import Translator

    t = Translator.load(runs["source"])
    r = t.translate("<2c> nuo elo", tgt_lang="a")
    assert r.src_pieces[0] == "<2a>" and "<2c>" not in r.src_pieces[1:]  # only the real tag


# ---------------------------------------------------------------------------------- evaluate


@pytest.mark.parametrize("tag", TAGS)
def test_evaluate_one_direction_records_it_and_its_off_target_rate(
    runs, corpus, stub_identifier, capsys, tag
):
    assert main(["evaluate", str(runs[tag]), "--direction", "b-c", "--bootstrap", "0"]) == 0
    printed = capsys.readouterr().out
    report = runs[tag] / "eval_test_beam2_b-c"
    assert f"report: {report}" in printed and "direction: b-c (trained)" in printed
    scores = json.loads((report / "scores.json").read_text())
    hyps = lines(report / "hyps.txt")
    assert lines(report / "srcs.txt") == lines(corpus / "test.b")
    assert lines(report / "refs.txt") == lines(corpus / "test.c")
    assert scores["direction"] == {"name": "b-c", "trained": True, "pivot": None}
    assert scores["test_set"]["direction"] == "b-c"
    wrong = sum(toy_language(h) != "c" for h in hyps if h.strip())
    off = scores["off_target"]
    assert off == {
        "share": wrong / off["n"],
        "n": sum(bool(h.strip()) for h in hyps),
        "identifier": "toy spelling",
        "target": "c",
    }
    assert off["share"] < 0.1
    assert f"off-target: {100 * off['share']:.1f}% of {off['n']} translations not read as c" in (
        printed
    )


def test_evaluate_without_direction_scores_every_trained_direction_in_a_table(
    runs, stub_identifier, capsys
):
    run = runs["target"]
    assert main(["evaluate", str(run), "--bootstrap", "0"]) == 0
    printed = capsys.readouterr().out
    summary = run / "eval_test_beam2_directions.md"
    assert f"table: {summary} (and .json)" in printed
    record = json.loads(summary.with_suffix(".json").read_text())
    assert list(record["directions"]) == DIRECTIONS
    assert (record["split"], record["beam"]) == ("test", 2)
    table = summary.read_text()
    header = "| direction | n | BLEU | chrF | off-target | BLEU 1-10 (n) |"
    assert header in table and header in printed
    for name, row in record["directions"].items():
        scores = json.loads((run / f"eval_test_beam2_{name}" / "scores.json").read_text())
        assert row["report"] == str(run / f"eval_test_beam2_{name}")
        assert (row["n"], row["bleu"], row["chrf"]) == (16, scores["bleu"], scores["chrf"])
        assert row["off_target"] == scores["off_target"]["share"]
        assert row["buckets"][0] == {"lo": 1, "hi": 10, "n": 16, "bleu": scores["bleu"]}
        cells = f"| {name} | 16 | {scores['bleu']:.2f} | {scores['chrf']:.2f} | "
        assert cells + f"{100 * row['off_target']:.1f}% | {scores['bleu']:.2f} (16) |" in table
    mean = sum(r["bleu"] for r in record["directions"].values()) / 4
    assert record["mean"]["bleu"] == pytest.approx(mean)
    assert f"| mean |  | {mean:.2f} |" in table


def test_every_direction_into_a_report_directory_of_ones_choice(runs, stub_identifier, tmp_path):
    out = tmp_path / "reports"
    assert main(["evaluate", str(runs["source"]), "--bootstrap", "0", "--report", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*DIRECTIONS, "directions.json", "directions.md"]
    )


@pytest.mark.parametrize("tag", TAGS)
def test_a_zero_shot_direction_and_its_pivot(runs, corpus, stub_identifier, capsys, tag):
    run = runs[tag]
    base = ["evaluate", str(run), "--direction", "a-c", "--bootstrap", "0"]
    assert main(base) == 0
    assert "direction: a-c (zero-shot)" in capsys.readouterr().out
    direct = json.loads((run / "eval_test_beam2_a-c" / "scores.json").read_text())
    assert direct["direction"] == {"name": "a-c", "trained": False, "pivot": None}
    assert 0 <= direct["off_target"]["share"] <= 1
    assert main([*base, "--pivot", "b"]) == 0
    assert "direction: a-c (zero-shot, through b (two passes of the model))" in (
        capsys.readouterr().out
    )
    report = run / "eval_test_beam2_a-c_via_b"
    pivot = json.loads((report / "scores.json").read_text())
    assert pivot["direction"] == {"name": "a-c", "trained": False, "pivot": "b"}
    assert pivot["test_set"]["sha256"] == direct["test_set"]["sha256"]  # nmt compare takes both
    assert lines(report / "srcs.txt") == lines(corpus / "test.a")
    assert pivot["off_target"]["share"] < 0.1  # its last pass is the trained b -> c


@pytest.mark.parametrize(
    "args, message",
    [
        (["--direction", "a-d"], "--direction a-d: this model translates into a, b, c, not d"),
        (["--direction", "d-a"], "--direction d-a: this model reads a, b, c, not d"),
        (["--direction", "a-a"], "--direction a-a: expected SRC-TGT of two languages"),
        (["--direction", "a-c", "--pivot", "a"], "--pivot a: the pivot must differ"),
        (["--pivot", "b"], "--pivot is for one direction: give --direction SRC-TGT"),
        (["--compare", "x"], "--compare draws one report: give --direction SRC-TGT"),
        (["--src", "x.a", "--ref", "x.b"], "this model translates several directions (a-b, "),
    ],
)
def test_a_direction_the_model_cannot_take_is_one_line(runs, capsys, args, message):
    assert main(["evaluate", str(runs["source"]), *args]) == 2
    assert error_line(capsys).startswith(message)


def test_a_one_direction_model_evaluates_as_before_and_takes_its_own_direction(
    tiny_transformer_run, capsys
):
    args = ["evaluate", str(tiny_transformer_run), "--bootstrap", "0", "--beam", "1"]
    assert main([*args, "--direction", "src-tgt"]) == 0
    scores = json.loads((tiny_transformer_run / "eval_test_beam1" / "scores.json").read_text())
    assert "direction" not in scores and "off_target" not in scores
    capsys.readouterr()
    assert main([*args, "--direction", "de-en"]) == 2
    assert error_line(capsys) == "--direction de-en: this model translates src-tgt only"


# ---------------------------------------------------------------------------------- off-target


def test_the_off_target_rate_is_the_share_of_outputs_read_as_another_language():
    from nmt.data.language_id import describe_off_target, off_target

    hyps = ["knu kgod", "nuo", "", "un dog kgod", "kaes"]
    record = off_target(hyps, "c", toy_identifier, "toy spelling")
    assert record == {"share": 0.5, "n": 4, "identifier": "toy spelling", "target": "c"}
    assert describe_off_target(record) == (
        "off-target: 50.0% of 4 translations not read as c (toy spelling)"
    )
    none = off_target(hyps, "c", None, "langid is not installed")
    assert none == {"share": None, "n": 4, "identifier": None, "why": "langid is not installed"}
    assert describe_off_target(none) == "off-target: not measured (langid is not installed)"


def test_langid_reads_real_sentences_among_the_models_languages():
    pytest.importorskip("langid")
    from nmt.data.language_id import LangidIdentifier, default_identifier, off_target

    sentences = {
        "en": ["A dog runs across the green meadow.", "Two men are playing football."],
        "fr": ["Un chien court dans la prairie verte.", "Deux hommes jouent au football."],
        "de": ["Ein Hund rennt über die grüne Wiese.", "Zwei Männer spielen Fußball."],
    }
    ident = LangidIdentifier(["de", "en", "fr"])
    assert ident.name == "langid over de, en, fr"
    for lang, texts in sentences.items():
        assert ident(texts) == [lang, lang]
    mixed = sentences["fr"] + sentences["en"]
    assert off_target(mixed, "fr", ident, ident.name)["share"] == 0.5
    assert default_identifier(["a", "b", "c"]) == (
        None,
        "langid does not know a, b, c; it knows ISO 639-1 codes such as de, en, fr",
    )


def test_the_evaluation_job_takes_any_identifier(runs):
    from nmt.jobs.evaluate import EvalOptions, evaluate

    seen = []

    def count(texts: list[str]) -> list[str]:
        seen.extend(texts)
        return ["b"] * len(texts)

    o = EvalOptions(direction="b-a", bootstrap=0, identifier=count, progress=False)
    scores, report = evaluate(str(runs["source"]), o)
    assert seen == [h for h in lines(report / "hyps.txt") if h.strip()]
    assert scores["off_target"]["share"] == 1.0 and scores["off_target"]["identifier"] == "count"


def test_evaluate_takes_the_directions_from_the_run_not_the_data_it_scores_on(runs, tmp_path):
    """A study scores a run on its own data section (EvalOptions.data): one direction's section
    over the same files still decodes the multilingual model into that direction, with its tag."""
    from nmt.jobs.evaluate import EvalOptions, evaluate
    from nmt.run_dir import RunDir

    run = runs["source"]
    one_way = replace(RunDir(run).saved_config().data, directions=[], src_lang="b", tgt_lang="c")
    common = dict(direction="b-c", bootstrap=0, identifier=toy_identifier, progress=False)
    plain, _ = evaluate(str(run), EvalOptions(report_dir=str(tmp_path / "run"), **common))
    scores, report = evaluate(
        str(run), EvalOptions(data=one_way, report_dir=str(tmp_path / "data"), **common)
    )
    assert scores["direction"] == {"name": "b-c", "trained": True, "pivot": None}
    assert lines(report / "hyps.txt") == lines(tmp_path / "run" / "hyps.txt")
    assert (scores["bleu"], scores["off_target"]) == (plain["bleu"], plain["off_target"])


# ---------------------------------------------------------------------------------- API, server


@pytest.fixture(scope="module")
def translators(runs):
    from nmt.api import Translator

    return {tag: Translator.load(run) for tag, run in runs.items()}


@pytest.mark.parametrize("tag", TAGS)
def test_the_api_translates_into_tgt_lang_with_constraints(translators, corpus, tag):
    t = translators[tag]
    assert (t.info.target_languages, t.info.source_languages) == (["a", "b", "c"], ["a", "b", "c"])
    assert t.info.multilingual
    src = lines(corpus / "test.b")[:6]
    out = t.translate(src, tgt_lang="c")
    assert share_in(out, "c") > 0.9 and share_in(t.translate(src, tgt_lang="a"), "a") > 0.9
    one = t.translate(src[0], tgt_lang="c")
    assert one == out[0] and isinstance(one, str)
    phrase = lines(corpus / "test.c")[1].split()[0]
    (r,) = t.translate([src[1]], tgt_lang="c", constraints=[[phrase]])
    assert r.unmet == 0 and phrase in r.split()
    with pytest.raises(NmtError, match=r"^this model translates into a, b, c: give tgt_lang$"):
        t.translate(src)
    with pytest.raises(NmtError, match=r"^tgt_lang d: this model translates into a, b, c, not d$"):
        t.translate(src, tgt_lang="d")


def test_the_api_of_a_one_direction_model_lists_its_own_language(tiny_transformer_run):
    from nmt.api import Translator

    t = Translator.load(tiny_transformer_run)
    assert (t.info.target_languages, t.info.multilingual) == (["tgt"], False)
    assert t.translate("a b", tgt_lang="tgt") == t.translate("a b")
    with pytest.raises(NmtError, match="tgt_lang fr: this model translates only into tgt"):
        t.translate("a b", tgt_lang="fr")


def test_the_server_takes_tgt_lang_and_names_it_in_a_422(translators, corpus):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.serve.app import create_app

    t = translators["target"]
    src = lines(corpus / "test.b")[:4]
    with TestClient(create_app(t)) as client:
        model = client.get("/v1/model").json()
        assert model["multilingual"] and model["target_languages"] == ["a", "b", "c"]
        assert model["example"] == lines(corpus / "test.a")[0]  # the first direction's source
        r = client.post("/v1/translate", json={"text": src, "tgt_lang": "c", "beam": 2})
        assert r.status_code == 200
        assert [x["text"] for x in r.json()["translations"]] == t.translate(
            src, beam=2, tgt_lang="c"
        )
        phrase = lines(corpus / "test.c")[1].split()[0]
        body = {"text": src[1:2], "tgt_lang": "c", "constraints": [[phrase]]}
        (r,) = client.post("/v1/translate", json=body).json()["translations"]
        assert r["unmet"] == 0 and phrase in r["text"].split()
        for body, message in (
            ({"text": src}, "this model translates into a, b, c: give tgt_lang"),
            ({"text": src, "tgt_lang": "d"}, "tgt_lang d: this model translates into a, b, c"),
            ({"text": src, "tgt_lang": 3}, "tgt_lang: input should be a valid string"),
            ({"text": src, "tgtlang": "c"}, "tgtlang: unknown field (did you mean 'tgt_lang'?)"),
        ):
            r = client.post("/v1/translate", json=body)
            assert r.status_code == 422 and r.json()["error"].startswith(message), r.json()


def test_the_api_and_the_server_translate_through_a_pivot_as_nmt_translate_does(
    runs, translators, corpus, tmp_path
):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.serve.app import create_app

    src, out = corpus / "test.a", tmp_path / "out.c"
    args = ["translate", str(runs["target"]), "-i", str(src), "-o", str(out), "--tgt-lang", "c"]
    assert main([*args, "--pivot", "b"]) == 0
    t, texts = translators["target"], lines(src)
    assert t.translate(texts, tgt_lang="c", pivot="b") == lines(out)
    assert t.translate(texts[0], tgt_lang="c", pivot="b") == lines(out)[0]
    with TestClient(create_app(t)) as client:
        r = client.post("/v1/translate", json={"text": texts, "tgt_lang": "c", "pivot": "b"})
        assert [x["text"] for x in r.json()["translations"]] == lines(out)


PIVOT_MISTAKES = [
    ({"pivot": "b"}, "this model translates into a, b, c: give tgt_lang"),
    ({"tgt_lang": "c", "pivot": "d"}, "pivot d: this model translates into a, b, c, not d"),
    ({"tgt_lang": "c", "pivot": "c"}, "pivot c: the pivot must differ from the source and the"),
    ({"tgt_lang": "c", "pivot": "b", "alignment": True}, "alignment and constraints cannot be"),
    ({"tgt_lang": "c", "pivot": "b", "constraints": [["x"]]}, "alignment and constraints cannot"),
]


def test_a_pivot_the_model_cannot_take_is_one_line_naming_the_field(
    translators, tiny_transformer_run
):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.api import Translator
    from nmt.serve.app import create_app

    one_way = Translator.load(tiny_transformer_run)
    only = [({"pivot": "b"}, "pivot b: a pivot needs a multilingual model (data.directions)")]
    for t, mistakes in ((translators["source"], PIVOT_MISTAKES), (one_way, only)):
        with TestClient(create_app(t)) as client:
            for kwargs, message in mistakes:
                with pytest.raises(NmtError, match="^" + re.escape(message)):
                    t.translate(["nuo"], **kwargs)
                r = client.post("/v1/translate", json={"text": ["nuo"], **kwargs})
                assert r.status_code == 422 and r.json()["error"].startswith(message), r.json()


def test_the_page_shows_the_language_menu_for_a_multilingual_model_only(
    translators, tiny_transformer_run
):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.api import Translator
    from nmt.serve.app import create_app

    with TestClient(create_app(translators["source"])) as client:
        page, js = client.get("/").text, client.get("/static/app.js").text
        assert client.get("/v1/model").json()["multilingual"] is True
    # the menu is hidden until the model says it is multilingual; then every request names it
    assert '<label id="tgt-lang-label" hidden>into <select id="tgt-lang"></select></label>' in page
    assert '$("tgt-lang-label").hidden = !model.multilingual;' in js
    assert 'if (model.multilingual) body.tgt_lang = $("tgt-lang").value;' in js
    with TestClient(create_app(Translator.load(tiny_transformer_run))) as client:
        model = client.get("/v1/model").json()
    assert (model["multilingual"], model["target_languages"]) == (False, ["tgt"])
