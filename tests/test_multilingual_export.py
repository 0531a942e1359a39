"""Exporting a multilingual run (data.directions): CTranslate2 decodes each direction as nmt does
with the tag on the source (a source piece) or on the target (`target_prefix`), and Hugging Face
gets the tags as MarianTokenizer's `>>xx<<` tokens (source mode; target mode is refused)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from nmt.checkpoint import load_model
from nmt.cli import main
from nmt.jobs import train as train_job
from nmt.text_translation import translate_texts
from test_multilingual import config, write_three_way

LANGS = ("a", "c")  # the target languages of b-a and b-c


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines()


@pytest.fixture(scope="module")
def three_way(tmp_path_factory) -> Path:
    sizes = {"train": 240, "valid": 12, "test": 30}
    return write_three_way(tmp_path_factory.mktemp("three_way_export"), sizes)


@pytest.fixture(scope="module", params=["source", "target"])
def run(three_way, tmp_path_factory, request) -> Path:
    """A post-norm Transformer trained 60 steps on four directions, the tag on one side: enough
    for outputs that depend on the tag."""
    root = tmp_path_factory.mktemp(f"run_{request.param}")
    cfg = config(three_way, root, tag=request.param)
    model = replace(cfg.model, norm="post")
    train = replace(cfg.train, max_steps=60, valid_every=1000, precision="fp32")
    return train_job.train(replace(cfg, model=model, train=train)).run


def ours(run: Path, lang: str, srcs: list[str]) -> list[str]:
    """`nmt translate --tgt-lang lang`: the direction's view, its tag forced in target mode."""
    cfg, model, tok, _ = load_model(run)
    view = tok.for_direction(lang, cfg.data.tag)
    prefixes = [""] * len(srcs) if cfg.data.tag == "target" else None
    return [t.text for t in translate_texts(model, view, srcs, cfg.decode, 1, prefixes=prefixes)]


def test_ctranslate2_decodes_each_direction_as_nmt_does(run, three_way, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from nmt.export.ctranslate2 import translate_ct2

    out = tmp_path / "ct2"
    assert main(["export", str(run), "--format", "ctranslate2", "-o", str(out)]) == 0
    cfg, _, tok, _ = load_model(run)
    vocab = json.loads(next(out.glob("*vocabulary.json")).read_text())
    info = json.loads((out / "nmt_export.json").read_text())
    assert info["tag"] == cfg.data.tag and info["directions"] == cfg.data.directions
    assert info["language_tags"] == {lang: f"<2{lang}>" for lang in ("a", "b", "c")}
    assert all(vocab[i] == f"<2{lang}>" for lang, i in tok.tags.items())  # control pieces too
    translator = ctranslate2.Translator(str(out))
    srcs = lines(three_way / "test.b")
    texts = {}
    for lang in LANGS:
        texts[lang] = ours(run, lang, srcs)
        view = tok.for_direction(lang, cfg.data.tag)
        assert translate_ct2(translator, view, srcs, cfg.decode) == texts[lang]
    assert texts["a"] != texts["c"]  # the tag decides the output


def test_the_documented_ctranslate2_call_is_what_nmt_decodes(run, three_way, tmp_path):
    """docs/deployment.md: pieces with the tag first (source mode) or target_prefix=[["<2xx>"]]
    (target mode); the hypothesis holds the prefix, which decoding drops."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece as spm

    from nmt.export.ctranslate2 import output_limit

    out = tmp_path / "ct2"
    assert main(["export", str(run), "--format", "ctranslate2", "-o", str(out)]) == 0
    cfg, _, _, _ = load_model(run)
    translator = ctranslate2.Translator(str(out))
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    srcs = lines(three_way / "test.b")[:10]
    for lang in LANGS:
        tag = f"<2{lang}>"
        src = sp.encode(srcs, out_type=str)
        src = [[tag] + s for s in src] if cfg.data.tag == "source" else src
        prefix = [[tag]] * len(src) if cfg.data.tag == "target" else None
        theirs = []
        for s, p in zip(src, prefix or [None] * len(src)):
            r = translator.translate_batch(
                [s],
                target_prefix=[p] if p else None,
                beam_size=1,
                max_decoding_length=output_limit(len(s) + 1, cfg.decode),
                min_decoding_length=0,
                suppress_sequences=[["<pad>"], ["<s>"]],
            )
            theirs.append(sp.decode([x for x in r[0].hypotheses[0] if x != tag]))
        assert theirs == ours(run, lang, srcs)


def test_hf_export_names_the_tags_as_marian_language_tokens(run, three_way, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    import torch

    out = tmp_path / "hf"
    cfg, _, tok, _ = load_model(run)
    if cfg.data.tag == "target":  # MarianTokenizer has no target-side language token
        assert main(["export", str(run), "--format", "hf", "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "('data.tag: target')" in err and not out.exists()
        return
    assert main(["export", str(run), "--format", "hf", "-o", str(out)]) == 0
    client = transformers.MarianMTModel.from_pretrained(out).eval()
    client_tok = transformers.MarianTokenizer.from_pretrained(out)
    assert client_tok.supported_language_codes == [">>a<<", ">>b<<", ">>c<<"]
    srcs = lines(three_way / "test.b")[:10]
    for lang in LANGS:
        theirs = []
        for s in srcs:
            enc = client_tok(f">>{lang}<< {s}", return_tensors="pt")
            with torch.no_grad():
                ids = client.generate(**enc, num_beams=1, max_new_tokens=40)
            theirs.append(client_tok.decode(ids[0], skip_special_tokens=True))
        assert theirs == ours(run, lang, srcs)
    back = tmp_path / "back"
    assert main(["import", "hf", str(out), "-o", str(back)]) == 0
    cfg_back, _, tok_back, _ = load_model(back)
    assert cfg_back.data.directions == cfg.data.directions and cfg_back.data.tag == "source"
    assert tok_back.tags == tok.tags
