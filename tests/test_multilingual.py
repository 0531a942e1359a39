"""Multilingual training (data.directions): one model, several directions, a language tag per
target language; every architecture trains it with no code of its own."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import REPO, make_config, write_three_way
from nmt.config.load import load_config
from nmt.data.corpus import load_split
from nmt.data.directions import direction_tokenizer, load_directions
from nmt.data.prepared import corpus_key, prepared_corpus
from nmt.data.synthetic import respell
from nmt.data.tokenizer import BOS, EOS
from nmt.errors import NmtError
from nmt.jobs import train as train_job

DIRECTIONS = ["a-b", "b-a", "c-b", "b-c"]
MODELS = {
    "seq2seq": {"arch": "seq2seq", "emb_size": 32, "hidden_size": 48},
    "rnnsearch": {"arch": "rnnsearch", "emb_size": 32, "hidden_size": 48},
    "transformer": {"arch": "transformer", "d_model": 32, "heads": 2, "ff": 64, "layers": 1},
}


@pytest.fixture(scope="module")
def three_way(tmp_path_factory) -> Path:
    return write_three_way(tmp_path_factory.mktemp("three_way"), {"train": 240, "valid": 12})


def data(corpus: Path, root: Path, **over) -> dict:
    return {
        "source": "local",
        "path": str(corpus),
        "splits": {"train": "train", "valid": "valid"},
        "directions": DIRECTIONS,
        "batch_tokens": 300,
        "prepared_dir": str(root / "prepared"),
        **over,
    }


def config(corpus: Path, root: Path, arch: str = "transformer", **data_over):
    return make_config(
        data=data(corpus, root, **data_over),
        vocab={"type": "unigram", "size": 120},
        model=MODELS[arch],
        train={
            "run_dir": str(root / f"run-{arch}"),
            "max_steps": 6,
            "valid_every": 3,
            "valid_max_sentences": 5,
            "log_every": 3,
            "lr": 0.003,
            "progress": False,
            "threads": 1,
        },
        decode={"max_len_a": 1.0, "max_len_b": 4},
    )


# ---------------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "directions, problem",
    [
        (["ab"], "entry 'ab' is not of the form 'xx-yy'"),
        (["a-b-c"], "entry 'a-b-c' is not of the form 'xx-yy'"),
        (["a-"], "entry 'a-' is not of the form 'xx-yy'"),
        (["a-b", "a-a"], "entry 'a-a' translates a language into itself"),
        (["a-b", "b-a", "a-b"], "entry 'a-b' is listed twice"),
    ],
)
def test_a_bad_direction_is_one_line_naming_the_key_and_the_entry(tmp_path, directions, problem):
    with pytest.raises(NmtError) as e:
        config(tmp_path, tmp_path, directions=directions)
    assert str(e.value) == f"'data.directions' in test config: {problem}" + (
        " (two language keys of letters, digits or '_' joined by '-', e.g. de-en)"
        if "form" in problem
        else ""
    )


def test_directions_need_a_joint_vocabulary_and_local_text_files(tmp_path):
    raw = {"data": data(tmp_path, tmp_path), "model": MODELS["transformer"]}
    with pytest.raises(
        NmtError, match=r"^'data.directions' in test config needs 'vocab.joint: true'"
    ):
        make_config(**raw, vocab={"joint": False})
    for over, named in (({"format": "tsv"}, "tsv"), ({"source": "hub", "hub_name": "x/y"}, "hub")):
        with pytest.raises(NmtError) as e:
            make_config(**{**raw, "data": {**raw["data"], **over}})
        assert "\n" not in str(e.value)
        assert str(e.value).startswith("'data.directions' in test config reads local text files")
        assert f"; {named} corpora hold one direction for now" in str(e.value)


def test_a_bad_direction_from_the_command_line_is_one_nmt_error_line(tmp_path, capsys):
    from nmt.cli import main

    path = tmp_path / "cfg.yaml"
    path.write_text(
        yaml.safe_dump({"data": data(tmp_path, tmp_path), "model": {"arch": "seq2seq"}})
    )
    assert main(["train", str(path), "--set", "data.directions=[de-de]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("nmt: error: 'data.directions' in ")
    assert "entry 'de-de' translates a language into itself" in err


def test_a_split_of_several_directions_is_read_one_direction_at_a_time(three_way, tmp_path):
    cfg = config(three_way, tmp_path)
    with pytest.raises(NmtError, match="read one direction at a time"):
        load_split(cfg.data, "valid")
    valid = load_directions(cfg.data, "valid")
    assert list(valid) == DIRECTIONS
    a, b = (three_way / "valid.a").read_text().splitlines(), (three_way / "valid.b").read_text()
    assert valid["a-b"] == (a, b.splitlines()) and valid["b-a"] == (b.splitlines(), a)
    assert valid["c-b"][0] == [respell(s) for s in a]


# ---------------------------------------------------------------------------------- tags


@pytest.fixture(scope="module")
def prepared(three_way, tmp_path_factory):
    """The prepared corpus in each tag mode (one subword model each: the same data and seed)."""
    root = tmp_path_factory.mktemp("prepared")
    return {tag: prepared_corpus(config(three_way, root, tag=tag)) for tag in ("source", "target")}


def test_each_target_language_has_a_tag_that_is_one_control_piece(prepared):
    tok = prepared["source"].tokenizer
    assert sorted(tok.tags) == ["a", "b", "c"]  # every direction's target language
    for lang, i in tok.tags.items():
        assert tok.src.id_to_piece(i) == f"<2{lang}>" and tok.src.is_control(i)
    assert tok.encode_source(["le dog"], "c", "source")[0][0] == tok.tags["c"]
    assert tok.encode_source(["le dog"], "c", "target") == tok.encode_src(["le dog"])
    assert tok.target_prefix("c", "target") == [tok.tags["c"]] and not tok.target_prefix(
        "c", "source"
    )
    with pytest.raises(
        NmtError, match=r"^this model has no language tag for 'd' \(target languages: a, b, c\)$"
    ):
        tok.encode_source(["le dog"], "d", "source")


def test_a_tag_typed_in_a_sentence_stays_text_and_decoding_drops_real_tags(prepared):
    tok = prepared["source"].tokenizer
    tags = set(tok.tags.values())
    typed = tok.encode_source(["le <2a> dog <2c>"], "b", "source")[0]
    assert typed[0] == tok.tags["b"] and not tags & set(typed[1:])  # only the real tag is one
    assert not tags & {i for x in tok.encode_tgt(["<2a> dog"]) for i in x}
    hyp = [tok.tags["a"]] + tok.encode_tgt(["le dog"])[0] + [EOS]
    assert tok.decode_tgt([hyp]) == ["le dog"]


def test_a_one_direction_model_has_no_tags_and_encodes_as_before(tiny_corpus, tmp_path):
    d = tiny_corpus("de", "en", sizes={"train": 60})
    cfg = make_config(
        data={
            "source": "local",
            "path": str(d),
            "src_lang": "de",
            "tgt_lang": "en",
            "splits": {"train": "train"},
            "prepared_dir": str(tmp_path),
        },
        vocab={"type": "unigram", "size": 100},
    )
    tok = prepared_corpus(cfg).tokenizer
    assert tok.tags == {} and direction_tokenizer(cfg.data, tok, "de-en") is tok
    with pytest.raises(NmtError, match="target languages: none: it was trained for one direction"):
        tok.for_direction("en", "source")


# ---------------------------------------------------------------------------------- data


@pytest.mark.parametrize("tag", ["source", "target"])
def test_batches_mix_every_direction_with_its_tag_on_the_chosen_side(prepared, tag):
    corpus = prepared[tag]
    tok = corpus.tokenizer
    assert corpus.directions == {d: 240 for d in DIRECTIONS}
    batcher = corpus.batcher(replace(config(Path("."), Path("."), tag=tag).data), seed=1)
    batches = batcher.epoch(0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(4 * 240))  # each pair once
    assert any(len(set(corpus.direction[b])) > 1 for b in batches)  # directions share batches
    want = {k: tok.tags[d.split("-")[1]] for k, d in enumerate(DIRECTIONS)}
    for ix in batches:
        b = batcher.batch(ix)
        first = b.src[:, 0] if tag == "source" else b.tgt_in[:, 1]
        assert first.tolist() == [want[k] for k in corpus.direction[ix]]
        assert (b.tgt_in[:, 0] == BOS).all()
    # the other side carries no tag at all
    other = batcher.batch(batches[0]).tgt_in if tag == "source" else batcher.batch(batches[0]).src
    assert not set(tok.tags.values()) & set(other.flatten().tolist())


def test_the_prepared_key_covers_directions_and_tag_but_not_temperature(three_way, tmp_path):
    base = config(three_way, tmp_path)
    key = corpus_key(base)
    other = {"source": "target", "target": "source"}[base.data.tag]
    assert corpus_key(config(three_way, tmp_path, tag=other)) != key
    assert corpus_key(config(three_way, tmp_path, directions=["a-b", "b-a"])) != key
    assert corpus_key(config(three_way, tmp_path, temperature=5.0)) == key
    one = config(three_way, tmp_path, directions=[], src_lang="a", tgt_lang="b")
    assert corpus_key(replace(one, data=replace(one.data, tag=other))) == corpus_key(one)


def test_the_filter_counts_a_sentence_without_its_tag(three_way, tmp_path):
    # max_len 3: the pairs the filter keeps are the same in both modes and for every direction
    # of the same sentences (the tag is not a token of the sentence)
    kept = {
        tag: prepared_corpus(config(three_way, tmp_path, tag=tag, max_len=3, max_ratio=9.0))
        for tag in ("source", "target")
    }
    assert kept["source"].directions == kept["target"].directions
    assert kept["source"].directions["a-b"] == kept["source"].directions["b-a"] < 240


# ---------------------------------------------------------------------------------- training


def valid_rows(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == "valid"]


@pytest.mark.parametrize("tag", ["source", "target"])
@pytest.mark.parametrize("arch", sorted(MODELS))
def test_every_architecture_trains_every_direction_in_both_tag_modes(
    three_way, tmp_path, arch, tag
):
    cfg = config(three_way, tmp_path, arch, tag=tag)
    run = train_job.train(cfg).run
    rows = valid_rows(run)
    assert [r["step"] for r in rows] == [3, 6]
    for row in rows:
        per = [row[f"bleu_{d}"] for d in DIRECTIONS]
        assert row["bleu"] == pytest.approx(np.mean(per))
        assert row["chrf"] == pytest.approx(np.mean([row[f"chrf_{d}"] for d in DIRECTIONS]))
    log = (run / "train.log").read_text()
    assert "kept pairs per direction: a-b 240, b-a 240, c-b 240, b-c 240" in log
    assert all(f"bleu_{d} " in log for d in DIRECTIONS)
    stored = load_config(run / "config.yaml", stored=True)
    assert stored == cfg and stored.data.directions == DIRECTIONS and stored.data.tag == tag


@pytest.mark.parametrize("tag", ["source", "target"])
def test_validation_scores_each_direction_with_its_own_tag_and_the_tag_steers_the_output(
    multilingual_runs, tmp_path, monkeypatch, tag
):
    """The test above holds with any tag (the mean is the mean); here the model of 150 steps
    shows that validation gave each direction its own tag: evaluating that direction on the same
    sentences gives its BLEU, while the same sources under another target's tag read otherwise."""
    from nmt.jobs import evaluate as evaluate_job

    monkeypatch.setattr(evaluate_job, "default_identifier", lambda langs: (None, "none"))
    run = multilingual_runs[tag]
    row = valid_rows(run)[-1]
    cfg = load_config(run / "config.yaml", stored=True)
    first = f"valid[:{cfg.train.valid_max_sentences}]"  # the sentences validation decoded
    data = replace(cfg.data, splits={**cfg.data.splits, "valid": first})
    hyps = {}
    for d in DIRECTIONS:
        opts = evaluate_job.EvalOptions(
            split="valid",
            beam=1,
            direction=d,
            data=data,
            bootstrap=0,
            progress=False,
            report_dir=str(tmp_path / d),
        )
        scores, report = evaluate_job.evaluate(str(run), opts)
        assert scores["bleu"] == pytest.approx(row[f"bleu_{d}"], abs=0.01), d
        hyps[d] = (report / "hyps.txt").read_text("utf-8").splitlines()
    # b-a and b-c translate the same sources: only the tag tells them apart
    words = {d: " ".join(hyps[d]).split() for d in ("b-a", "b-c")}
    assert sum(w.startswith("k") for w in words["b-c"]) > 0.8 * len(words["b-c"])
    assert sum(w.startswith("k") for w in words["b-a"]) < 0.2 * len(words["b-a"])


def test_unequal_directions_sample_by_temperature_and_resume_exactly(tmp_path):
    """Directions differ in size where one language's lines are blank (dropped as empty): at
    T = 5 the small ones get more of each epoch, and a resumed run continues bit for bit."""
    import torch

    from nmt.checkpoint import load_checkpoint, step_checkpoints

    corpus = write_three_way(tmp_path / "corpus", {"train": 240, "valid": 12})
    lines = (corpus / "train.c").read_text("utf-8").splitlines()
    (corpus / "train.c").write_text(
        "".join(("" if i < 160 else x) + "\n" for i, x in enumerate(lines))
    )
    cfg = config(corpus, tmp_path / "a", temperature=5.0)
    cfg = replace(cfg, train=replace(cfg.train, max_steps=10, valid_every=1000))
    prepared = prepared_corpus(cfg)
    assert prepared.directions == {"a-b": 240, "b-a": 240, "c-b": 80, "b-c": 80}
    epoch = np.concatenate(prepared.batcher(cfg.data, seed=1).epoch(0))
    counts = np.bincount(prepared.direction[epoch])
    share = 80**0.2 / (2 * 80**0.2 + 2 * 240**0.2)  # each small one: 0.223, up from 80 / 640
    assert counts.sum() == 640 and np.all(np.abs(counts[2:] - 640 * share) < 1)

    run_a = train_job.train(cfg).run
    part = replace(cfg, train=replace(cfg.train, run_dir=str(tmp_path / "b"), max_steps=4))
    run_b = train_job.train(part).run
    assert load_checkpoint(step_checkpoints(run_b)[-1])["progress"]["batch_in_epoch"] > 0
    train_job.train(replace(part, train=replace(part.train, max_steps=10)), resume=True)
    a, b = (load_checkpoint(step_checkpoints(r)[-1])["model"] for r in (run_a, run_b))
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------------- recipe


def test_the_multilingual_recipe_is_the_de_en_model_on_four_directions():
    multi = load_config(REPO / "configs" / "multi30k" / "multi" / "transformer.yaml")
    de_en = load_config(REPO / "configs" / "multi30k" / "de-en" / "transformer.yaml")
    assert multi.data.directions == ["de-en", "en-de", "fr-en", "en-fr"]
    assert multi.model == de_en.model and multi.vocab == de_en.vocab
    assert multi.data.source == "local" and multi.data.format == "text"
    assert de_en.train.max_steps < multi.train.max_steps <= 4 * de_en.train.max_steps


def test_the_synthetic_corpus_takes_directions_between_its_three_languages():
    synthetic = {"train": 30, "valid": 5, "test": 5, "lexicon": 40, "max_words": 8}
    data = {"source": "synthetic", "synthetic": synthetic}
    vocab = {"type": "word", "joint": True}
    cfg = make_config(data={**data, "directions": ["src-tgt", "alt-tgt", "tgt-alt"]}, vocab=vocab)
    valid = load_directions(cfg.data, "valid")
    assert valid["src-tgt"][1] == valid["alt-tgt"][1] == valid["tgt-alt"][0]  # the same tgt
    assert valid["alt-tgt"][0] == [respell(s) for s in valid["src-tgt"][0]]
    with pytest.raises(NmtError) as e:
        make_config(data={**data, "directions": ["src-tgt", "de-tgt"]}, vocab=vocab)
    assert str(e.value) == (
        "'data.directions' in test config: the synthetic corpus has no language 'de' "
        "(its languages: src, tgt, alt; e.g. [src-tgt, alt-tgt])"
    )


def test_the_toy_multilingual_config_trains_four_directions_of_the_synthetic_corpus():
    cfg = load_config(REPO / "configs" / "toy" / "multilingual.yaml")
    assert cfg.data.source == "synthetic" and cfg.train.precision == "fp32"
    assert cfg.data.directions == ["src-tgt", "tgt-src", "alt-tgt", "tgt-alt"]
    assert (
        cfg.data.synthetic.lexicon
        == load_config(REPO / "configs/toy/rnnsearch.yaml").data.synthetic.lexicon
    )


def test_training_warns_in_one_line_for_each_direction_an_epoch_leaves_out(tmp_path):
    corpus = write_three_way(tmp_path / "corpus", {"train": 240, "valid": 12})
    lines = (corpus / "train.c").read_text("utf-8").splitlines()  # c-b and b-c: 80 pairs each
    (corpus / "train.c").write_text(
        "".join(("" if i < 160 else x) + "\n" for i, x in enumerate(lines))
    )
    cfg = config(corpus, tmp_path, temperature=0.1)
    cfg = replace(cfg, train=replace(cfg.train, max_steps=1, valid_every=1000))
    log = (train_job.train(cfg).run / "train.log").read_text()
    warned = [x.split(" WARNING ", 1)[1] for x in log.splitlines() if "gets no training pair" in x]
    assert [w.split(":")[0] for w in warned] == [
        "direction c-b gets no training pair",
        "direction b-c gets no training pair",
    ]
    assert all(
        "data.temperature 0.1 gives its 80 kept pairs a share that rounds to 0" in w for w in warned
    )
