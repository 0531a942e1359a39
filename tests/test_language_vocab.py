"""`decode.language_vocab N` (`--language-vocab N`): a translation holds only target pieces seen at
least N times in its target language's training text, in every search; a forced prefix and a
positive phrase still get their pieces. On the toy three-language corpus (disjoint words), the
zero-shot a -> c output of a multilingual model keeps to c's pieces, and `nmt evaluate` writes
its report beside the plain one, not over it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from conftest import TAGS
from nmt.api import Translator
from nmt.cli import main
from nmt.config import DecodeConfig
from nmt.data.language_pieces import count_target_pieces, masked_pieces
from nmt.decode import translate_ids
from nmt.errors import NmtError
from nmt.inference import load_for_decoding
from test_decode import ARCHS, V, make_model, random_sources

pytestmark = pytest.mark.usefixtures("one_thread")

EOS = 3


def ban(*ids: int) -> torch.Tensor:
    mask = torch.zeros(V, dtype=torch.bool)
    mask[list(ids)] = True
    return mask


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("how", ["greedy", "beam", "sample"])
def test_no_search_writes_a_banned_token(arch, how):
    model = make_model(arch, seed=41)
    sources = random_sources(8, seed=42)
    cfg = DecodeConfig(beam=1 if how == "greedy" else 3, nbest=2, sample=how == "sample")
    plain = {i for hs in translate_ids(model, sources, cfg) for h in hs for i in h.tokens}
    banned = sorted(plain - {EOS})[:4]
    assert banned  # the plain search writes them: the test bites
    out = translate_ids(model, sources, cfg, masked=ban(*banned))
    assert all(not set(h.tokens) & set(banned) for hs in out for h in hs)


def test_a_prefix_and_a_positive_phrase_keep_their_banned_pieces():
    model = make_model("transformer", seed=43)
    sources = random_sources(3, seed=44)
    cfg = DecodeConfig(beam=3)
    out = translate_ids(
        model,
        sources,
        cfg,
        prefixes=[[5], [], []],
        positive_constraints=[[], [[6, 7]], []],
        masked=ban(5, 6, 7),
    )
    assert out[0][0].tokens[0] == 5
    tokens = out[1][0].tokens
    assert any(tokens[i : i + 2] == [6, 7] for i in range(len(tokens)))
    assert not {5, 6, 7} & set(out[2][0].tokens)


# ------------------------------------------------------------------------ a multilingual model


def pieces_of(translator: Translator, text: str, lang: str) -> list[int]:
    return translator.tokenizer(lang).encode_tgt([text])[0]


@pytest.mark.parametrize("tag", TAGS)
def test_zero_shot_output_keeps_to_the_target_languages_pieces(
    multilingual_runs, three_way_corpus, tag
):
    t = Translator.load(multilingual_runs[tag], decode={"language_vocab": 1})
    counts = t.tok.piece_counts["c"]
    src = (three_way_corpus / "test.a").read_text("utf-8").splitlines()
    out = t.translate(src, tgt_lang="c")
    tags = set(t.tok.tags.values())
    written = [i for text in out for i in pieces_of(t, text, "c") if i not in tags]
    assert written and all(counts[i] >= 1 for i in written)
    # the counts are c's training text's, piece by piece
    train_c = (three_way_corpus / "train.c").read_text("utf-8").splitlines()
    seen = {i for ids in t.tok.tgt.encode(train_c) for i in ids}
    assert {i for i, n in enumerate(counts) if n} == seen


def test_nmt_serve_takes_the_setting_and_its_page_translates_with_it(
    multilingual_runs, three_way_corpus, monkeypatch
):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.serve.app import create_app

    made, real = {}, Translator.load

    def load(*args, **kwargs):
        made["translator"] = real(*args, **kwargs)
        raise SystemExit(0)  # stop before serving: the loaded translator is what is checked

    monkeypatch.setattr(Translator, "load", staticmethod(load))
    with pytest.raises(SystemExit):
        main(["serve", str(multilingual_runs["target"]), "--language-vocab", "1", "--port", "0"])
    monkeypatch.undo()
    t = made["translator"]
    assert t.cfg.decode.language_vocab == 1 and t.tok.piece_counts["c"]
    src = (three_way_corpus / "test.a").read_text("utf-8").splitlines()[:4]
    with TestClient(create_app(t)) as client:
        r = client.post("/v1/translate", json={"text": src, "tgt_lang": "c"})
        assert r.status_code == 200
        assert [x["text"] for x in r.json()["translations"]] == t.translate(src, tgt_lang="c")


def test_evaluate_writes_a_report_of_its_own_and_names_the_setting(
    multilingual_runs, capsys, monkeypatch
):
    monkeypatch.setattr(
        "nmt.jobs.evaluate.default_identifier",
        lambda langs: (lambda texts: ["c"] * len(texts), "stub"),
    )
    run = multilingual_runs["target"]
    args = ["evaluate", str(run), "--direction", "a-c", "--bootstrap", "0"]
    assert main(args) == 0
    plain = (run / "eval_test_beam2_a-c" / "hyps.txt").read_text("utf-8")
    assert main([*args, "--language-vocab", "1"]) == 0
    printed = capsys.readouterr().out
    assert "language vocabulary: pieces seen >= 1 times in the target's training text" in printed
    report = run / "eval_test_beam2_vocab1_a-c"
    scores = json.loads((report / "scores.json").read_text())
    assert scores["direction"]["name"] == "a-c" and scores["n"] == 16
    assert scores["decode"]["language_vocab"] == 1
    assert (run / "eval_test_beam2_a-c" / "hyps.txt").read_text("utf-8") == plain


def test_a_count_of_zero_bans_nothing_and_tags_are_never_banned(multilingual_runs):
    t = Translator(load_for_decoding(multilingual_runs["target"], overrides={"language_vocab": 5}))
    view = t.tokenizer("c")
    assert masked_pieces(view, 0) is None
    mask = masked_pieces(view, 5)
    assert mask.shape == (view.tgt_vocab_size,)
    assert not mask[[EOS, *view.tags.values()]].any()
    assert mask.any()


def test_training_data_that_is_gone_is_one_line_naming_the_file(multilingual_runs, tmp_path):
    t = Translator.load(multilingual_runs["source"])
    data = replace(t.cfg.data, path=str(tmp_path / "gone"), prepared_dir=None)
    with pytest.raises(NmtError) as e:
        count_target_pieces(data, t.tok)
    message = str(e.value)
    assert message.startswith("decode.language_vocab counts the training text's pieces: ")
    assert "gone" in message and "\n" not in message


def test_a_negative_count_is_one_line_naming_the_flag(multilingual_runs, capsys):
    run = multilingual_runs["source"]
    with pytest.raises(SystemExit) as e:
        main(["evaluate", str(run), "--direction", "a-c", "--language-vocab", "-1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "nmt: error: argument --language-vocab: expected an integer >= 0, got -1 "
        "(see 'nmt evaluate --help')"
    )


def test_a_model_loaded_without_counts_says_how_to_get_them(multilingual_runs):
    t = Translator.load(multilingual_runs["source"])
    with pytest.raises(NmtError, match="no piece counts for target language 'c'"):
        masked_pieces(t.tokenizer("c"), 1)
