"""CTranslate2 export: the exported model translates like `nmt translate`, for every Transformer
variant; RNNs and existing directories are refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu

from conftest import tiny_config, tiny_model, write_yaml
from nmt.checkpoint import load_model
from nmt.cli import main
from nmt.config.load import load_config
from nmt.data.corpus import load_split
from nmt.jobs import train as train_job
from nmt.text_translation import translate_texts

ctranslate2 = pytest.importorskip("ctranslate2")
from nmt.export.ctranslate2 import export_ctranslate2, translate_ct2  # noqa: E402

# A wider Transformer on a larger corpus than the tiny setup's: one that translates the toy
# language well enough that two engines agreeing on it means something.
TRANSFORMER = tiny_model(
    "transformer", d_model=64, heads=4, ff=128, dropout=0.0, tie_embeddings=True
)
CORPUS = {
    "batch_tokens": 600,
    "synthetic": {
        "train": 1500,
        "valid": 40,
        "test": 200,
        "lexicon": 40,
        "max_words": 14,
        "seed": 3,
    },
}


def train_run(tmp: Path, steps: int, model: dict = TRANSFORMER, **sections) -> Path:
    cfg = tiny_config(tmp, data=CORPUS, model=model, train={"max_steps": steps}, **sections)
    return train_job.train(load_config(write_yaml(tmp / "c.yaml", cfg))).run


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A small Transformer trained long enough to translate the toy corpus reasonably."""
    tmp = tmp_path_factory.mktemp("export")
    return train_run(tmp, steps=160, decode={"max_len_a": 1.2})  # the export carries it


def both_engines(run: Path, ct2_dir: Path, beam: int, n: int = 200, **decode):
    cfg, model, tok, _ = load_model(run)
    for k, v in decode.items():
        setattr(cfg.decode, k, v)
    src, ref = load_split(cfg.data, "test")
    src, ref = src[:n], ref[:n]
    ours = [t.text for t in translate_texts(model, tok, src, cfg.decode, beam=beam)]
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=1)
    return ours, translate_ct2(translator, tok, src, cfg.decode, beam=beam), ref


def same_share(a: list[str], b: list[str]) -> float:
    return sum(x == y for x, y in zip(a, b)) / len(a)


def test_exported_model_translates_like_nmt_greedy_and_beam(trained, tmp_path):
    out = tmp_path / "ct2"
    assert main(["export", str(trained), "--format", "ctranslate2", "-o", str(out)]) == 0
    for name in (
        "model.bin",
        "config.json",
        "shared_vocabulary.json",
        "spm.model",
        "nmt_export.json",
    ):
        assert (out / name).is_file(), name
    assert json.loads((out / "nmt_export.json").read_text())["decode"]["max_len_a"] == 1.2

    ours, theirs, ref = both_engines(trained, out, beam=1)
    assert sacrebleu.corpus_bleu(ours, [ref]).score > 20  # a model worth comparing
    assert same_share(ours, theirs) >= 0.98
    # Beam 5 ranked by the plain sum of log-probs: the two engines' length penalties differ
    # (GNMT ((5 + len) / 6) ** alpha here, len ** alpha in CTranslate2), so alpha is 0.
    ours, theirs, ref = both_engines(trained, out, beam=5, alpha=0.0)
    bleu = [sacrebleu.corpus_bleu(h, [ref]).score for h in (ours, theirs)]
    # The same output on (almost) every line: one near-tie that the two engines' arithmetic
    # breaks apart moves BLEU on 200 lines by about 0.3, hence the share first.
    assert same_share(ours, theirs) >= 0.98
    assert abs(bleu[0] - bleu[1]) <= 0.5, bleu


def test_both_engines_stop_at_the_same_per_sentence_limit(trained, tmp_path):
    out = export_ctranslate2(trained, tmp_path / "ct2")
    ours, theirs, _ = both_engines(trained, out, beam=1, n=80, max_len_a=0.4, max_len_b=1)
    assert any(len(h.split()) < len(r.split()) for h, r in zip(ours, _))  # limits did bite
    assert same_share(ours, theirs) >= 0.98


@pytest.mark.parametrize(
    "variant",
    [
        {"norm": "post", "positions": "learned"},
        {"norm": "pre", "tie_embeddings": False, "tie_output": False},
        {"norm": "post", "tie_embeddings": False, "separate": True},
    ],
)
def test_every_transformer_variant_exports_exactly(tmp_path, variant):
    variant = dict(variant)
    vocab = {"joint": False} if variant.pop("separate", False) else {}
    # 80 steps: at 10 the separate-vocabulary model gave 3 distinct lines of 60, most of them
    # empty (BLEU 0), and two engines agreeing on near-constant output proves little.
    run = train_run(tmp_path, steps=80, model={**TRANSFORMER, **variant}, vocab=vocab)
    out = export_ctranslate2(run, tmp_path / "ct2")
    if not vocab.get("joint", True):
        for name in (
            "source_vocabulary.json",
            "target_vocabulary.json",
            "spm.src.model",
            "spm.tgt.model",
        ):
            assert (out / name).is_file(), name
    ours, theirs, ref = both_engines(run, out, beam=1, n=60)
    # Output worth comparing: 58 distinct lines and BLEU 17-32 here, where repeating the best
    # single reference line on every line scores 5.5.
    assert len(set(ours)) >= 30 and sacrebleu.corpus_bleu(ours, [ref]).score >= 8, ours[:5]
    assert same_share(ours, theirs) >= 0.98


def test_int8_export_translates_close_to_float(trained, tmp_path):
    out = export_ctranslate2(trained, tmp_path / "ct2", quantization="int8")
    ours, theirs, ref = both_engines(trained, out, beam=1, n=100)
    bleu = [sacrebleu.corpus_bleu(h, [ref]).score for h in (ours, theirs)]
    assert abs(bleu[0] - bleu[1]) <= 2.0, bleu


def test_rnn_models_cannot_be_exported(tmp_path, capsys):
    run = train_run(tmp_path, steps=2, model=tiny_model("rnnsearch", emb_size=16, hidden_size=16))
    capsys.readouterr()
    code = main(["export", str(run), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "rnnsearch" in err and "no RNN decoder" in err
    assert not (tmp_path / "ct2").exists()


def test_existing_output_directory_is_kept_without_overwrite(trained, tmp_path, capsys):
    out = tmp_path / "ct2"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    args = ["export", str(trained), "--format", "ctranslate2", "-o", str(out)]
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err and (out / "mine.txt").is_file()
    assert main(args + ["--overwrite"]) == 0
    assert (out / "model.bin").is_file() and not (out / "mine.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"]  # no temporary directory left
