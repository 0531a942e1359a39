"""Multilingual Marian models (OPUS-MT's en-ROMANCE, en-mul, ...) in and out: `nmt import hf`
turns their `>>fra<<` language tokens into our `<2fra>` tags (source mode), so an imported run
encodes, scores and decodes each target language as `transformers` does for ">>fra<< text", and
`nmt export --format hf` writes the tags back as `>>xx<<` tokens. Every model is built here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from hf_models import imported_run, load_hf, marian_dir, synthetic_corpus
from nmt.checkpoint import load_checkpoint, load_model
from nmt.cli import main
from nmt.errors import NmtError
from nmt.importers.hf import import_hf
from nmt.importers.languages import data_section, source_language
from nmt.text_translation import score_pairs, translate_texts

transformers = pytest.importorskip("transformers")
LANGS = ["fra", "ita"]


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return synthetic_corpus(tmp_path_factory.mktemp("multi_hf") / "corpus")


@pytest.fixture(scope="module", params=[False, True], ids=["codes-in-vocab", "codes-in-spm"])
def marian(corpus, request) -> Path:
    """A multilingual Marian model: >>fra<< and >>ita<< in vocab.json (and, like some OPUS-MT
    models, as user-defined pieces of the source sentencepiece model)."""
    name = f"marian-{request.param}"
    codes = {"lang_codes": LANGS, "codes_in_spm": request.param, "source_lang": "en"}
    return marian_dir(corpus.parent / name, corpus, seed=4, **codes)


@pytest.fixture(scope="module")
def hf(marian):
    return load_hf(marian)


@pytest.fixture(scope="module")
def imported(marian) -> Path:
    return imported_run(marian, marian.parent / f"{marian.name}-run")


def their_pieces(tok, ids: list[int]) -> list[str]:
    """Marian's pieces of `ids`, each language token under our tag's name."""
    out = tok.convert_ids_to_tokens(ids)
    return [f"<2{p[2:-2]}>" if p in tok.supported_language_codes else p for p in out]


def generate(model, tok, text: str, max_new: int) -> list[int]:
    """transformers' greedy ids for `text`, without the start token (and eos)."""
    enc = tok(text, return_tensors="pt")
    banned = [[model.config.pad_token_id]]
    with torch.no_grad():
        out = model.generate(**enc, num_beams=1, max_new_tokens=max_new, bad_words_ids=banned)
    ids = out[0, 1:].tolist()
    return ids[:-1] if ids and ids[-1] == model.config.eos_token_id else ids


# ----------------------------------------------------------------------------------------------
# The run


def test_language_tokens_become_tags_and_directions(imported, hf):
    cfg, _, tok, _ = load_model(imported)
    assert cfg.data.directions == ["en-fra", "en-ita"] and cfg.data.tag == "source"
    assert sorted(tok.tags) == LANGS
    for lang, i in tok.tags.items():
        for sp in (tok.src, tok.tgt):  # one piece on both sides, never made from text
            assert sp.id_to_piece(i) == f"<2{lang}>" and sp.is_control(i)
    assert hf[1].supported_language_codes == [">>fra<<", ">>ita<<"]


def test_encoding_for_a_language_gives_marians_ids_for_its_token(imported, hf, corpus):
    _, _, tok, _ = load_model(imported)
    marian_tok = hf[1]
    texts = lines(corpus / "test.src")[:10] + ["les ZZZ saton"]
    for lang in LANGS:
        ours = tok.encode_source(texts, lang, "source")
        assert all(x[0] == tok.tags[lang] for x in ours)
        for text, mine in zip(texts, ours):
            theirs = marian_tok(f">>{lang}<< {text}")["input_ids"]
            assert [tok.src.id_to_piece(i) for i in mine[:-1]] + ["</s>"] == their_pieces(
                marian_tok, theirs
            )
    # a language token typed in the text stays text: only --tgt-lang (the tag) selects
    typed = tok.encode_src([f">>fra<< {texts[0]}"])[0]
    assert not set(tok.tags.values()) & set(typed)


def test_scores_and_greedy_output_equal_transformers_for_each_language(imported, hf, corpus):
    cfg, model, tok, _ = load_model(imported)
    marian, marian_tok = hf
    srcs, refs = lines(corpus / "test.src")[:12], lines(corpus / "test.tgt")[:12]
    outputs = {}
    for lang in LANGS:
        view = tok.for_direction(lang, cfg.data.tag)
        for s, r, score in zip(srcs, refs, score_pairs(model, view, srcs, refs, cfg.decode)):
            enc = marian_tok(f">>{lang}<< {s}", text_target=r, return_tensors="pt")
            with torch.no_grad():
                logits = marian(**enc).logits[0].float()
            theirs = torch.log_softmax(logits, -1).gather(1, enc["labels"][0][:, None]).sum()
            assert abs(score["score"] - theirs.item()) / abs(theirs.item()) < 1e-4
        ours = translate_texts(model, view, srcs, cfg.decode, beam=1)
        for s, t in zip(srcs, ours):
            n = len(view.encode_src([s])[0])  # with its tag, as transformers counts it
            limit = math.floor(cfg.decode.max_len_a * n + cfg.decode.max_len_b)
            theirs = generate(marian, marian_tok, f">>{lang}<< {s}", limit + 1)
            mine = [tok.tgt.id_to_piece(i) for i in t.hyp.tokens if i != 3]
            assert mine == their_pieces(marian_tok, theirs), (lang, s)
        outputs[lang] = [t.text for t in ours]
    assert any(outputs["fra"]) and outputs["fra"] != outputs["ita"]  # the tag steers the model


# ----------------------------------------------------------------------------------------------
# What is refused, and the direction names


def test_separate_vocabularies_with_language_tokens_are_refused_in_one_line(corpus, tmp_path):
    marian = marian_dir(tmp_path / "m", corpus, lang_codes=LANGS, separate_vocabs=True)
    with pytest.raises(NmtError) as e:
        import_hf(str(marian), tmp_path / "run")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("the model has language tokens (>>fra<<, >>ita<<) and separate")


def test_a_code_no_tag_can_name_is_refused_in_one_line(corpus, tmp_path, capsys):
    marian = marian_dir(tmp_path / "m", corpus, lang_codes=["fra", "sr-Latn"])
    assert main(["import", "hf", str(marian), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "language token '>>sr-Latn<<' has a code nmt cannot" in err


@pytest.mark.parametrize(
    "tokenizer_lang, model, expected",
    [
        ("en", "whatever", "en"),
        (None, "Helsinki-NLP/opus-mt-en-ROMANCE", "en"),
        (None, "Helsinki-NLP/opus-mt-tc-big-en-romance", "en"),
        (None, "/models/opus-mt-de-mul/", "de"),
        (None, "/tmp/marian", "src"),
        ("en-US", "/tmp/marian", "src"),
    ],
)
def test_the_source_language_comes_from_the_tokenizer_or_the_opus_mt_name(
    tokenizer_lang, model, expected
):
    assert source_language(tokenizer_lang, model) == expected


def test_a_code_that_is_the_source_language_names_no_direction():
    section = data_section(object(), ["de", "en", "fr"], "en")
    assert section == {"directions": ["en-de", "en-fr"], "tag": "source"}


# ----------------------------------------------------------------------------------------------
# Out again: Hugging Face and CTranslate2


def test_an_imported_multilingual_run_exports_to_hf_and_back(imported, corpus, tmp_path):
    out = tmp_path / "hf"
    assert main(["export", str(imported), "--format", "hf", "-o", str(out)]) == 0
    vocab = json.loads((out / "vocab.json").read_text())
    _, _, tok, _ = load_model(imported)
    assert {lang: vocab[f">>{lang}<<"] for lang in LANGS} == tok.tags
    client_tok = transformers.MarianTokenizer.from_pretrained(out)
    assert client_tok.supported_language_codes == [">>fra<<", ">>ita<<"]
    back = tmp_path / "back"
    assert main(["import", "hf", str(out), "-o", str(back)]) == 0
    a, b = (load_checkpoint(r / "best.pt") for r in (imported, back))
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    cfg_a, cfg_b = (yaml.safe_load((r / "config.yaml").read_text()) for r in (imported, back))
    for section in (cfg_a, cfg_b):  # the export's position table covers our length limits
        section["model"].pop("max_positions")
    assert cfg_a["model"] == cfg_b["model"]
    assert cfg_b["data"]["directions"] == ["en-fra", "en-ita"]
    assert load_model(back)[2].tags == tok.tags


def test_an_imported_multilingual_run_decodes_in_ctranslate2_as_ours(imported, corpus, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from nmt.export.ctranslate2 import translate_ct2

    out = tmp_path / "ct2"
    assert main(["export", str(imported), "--format", "ctranslate2", "-o", str(out)]) == 0
    cfg, model, tok, _ = load_model(imported)
    translator = ctranslate2.Translator(str(out))
    srcs = lines(corpus / "test.src")
    for lang in LANGS:
        view = tok.for_direction(lang, "source")
        ours = [t.text for t in translate_texts(model, view, srcs, cfg.decode, beam=1)]
        ct2 = translate_ct2(translator, view, srcs, cfg.decode)
        assert sum(a == b for a, b in zip(ours, ct2)) >= 0.95 * len(srcs)


def test_an_imported_multilingual_run_fine_tunes_on_its_directions(imported, corpus, tmp_path):
    """A corpus per tag language (here the same target text twice) continues training the
    imported model in both directions, its tags the parent's."""
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid"):
        (data / f"{split}.en").write_text((corpus / f"{split}.src").read_text())
        for lang in LANGS:
            (data / f"{split}.{lang}").write_text((corpus / f"{split}.tgt").read_text())
    parent = yaml.safe_load((imported / "config.yaml").read_text())
    cfg = {
        "data": {
            "source": "local",
            "path": str(data),
            "directions": ["en-fra", "en-ita"],
            "splits": {"train": "train", "valid": "valid"},
            "batch_tokens": 300,
            "prepared_dir": str(tmp_path / "prepared"),
        },
        "vocab": parent["vocab"],
        "model": parent["model"],
        "train": {
            "run_dir": str(tmp_path / "tuned"),
            "init_from": str(imported),
            "max_steps": 2,
            "valid_every": 2,
            "valid_max_sentences": 4,
            "progress": False,
            "threads": 1,
        },
    }
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["train", str(tmp_path / "tune.yaml")]) == 0
    metrics = (tmp_path / "tuned" / "metrics.jsonl").read_text()
    assert '"bleu_en-fra"' in metrics and '"bleu_en-ita"' in metrics
    assert load_model(tmp_path / "tuned")[2].tags == load_model(imported)[2].tags
