"""The decoding toolbox from the command line: ensembles, averaged checkpoints, scoring,
alignments, prefixes, sampling and n-gram bans, on tiny trained runs of two architectures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from nmt.checkpoint import (
    load_checkpoint,
    load_model,
    load_models,
    resolve,
    step_checkpoints,
)
from nmt.cli import main
from nmt.config import DecodeConfig, SyntheticConfig
from nmt.config.load import load_config, model_config
from nmt.data.synthetic import write_corpus
from nmt.decode import translate_ids
from nmt.jobs import train as train_job
from nmt.models import build_model
from nmt.models.ensemble import Ensemble
from nmt.precision import autocast_for, decode_precision
from nmt.text_translation import score_pairs, translate_texts

MODELS = {
    "rnnsearch": {"arch": "rnnsearch", "emb_size": 32, "hidden_size": 64},
    "transformer": {"arch": "transformer", "d_model": 32, "heads": 2, "ff": 64, "layers": 2},
}
TRAIN = {
    "lr": 0.003,
    "log_every": 5,
    "valid_every": 10,
    "valid_max_sentences": 5,
    "progress": False,
    "seed": 7,
    "threads": 1,
    "keep_last": 3,
}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(
        out,
        replace(SyntheticConfig(), train=300, valid=20, test=12, lexicon=30, max_words=10, seed=3),
    )
    return out


def train_run(root: Path, name: str, corpus: Path, model: dict, **train) -> Path:
    cfg = {
        "data": {"source": "local", "path": str(corpus), "batch_tokens": 400},
        "vocab": {"type": "word", "size": 200},
        "model": model,
        "train": {"run_dir": str(root / name), "max_steps": 30, **TRAIN, **train},
        "decode": {"beam": 2, "max_len_a": 1.2, "max_len_b": 5},
    }
    (root / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return train_job.train(load_config(root / f"{name}.yaml")).run


@pytest.fixture(scope="module")
def runs(tmp_path_factory, corpus) -> dict[str, Path]:
    """rnnsearch (averaging its last 2 checkpoints at the end) and transformer, same vocabulary."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "rnnsearch": train_run(root, "rnnsearch", corpus, MODELS["rnnsearch"], average_last=2),
        "transformer": train_run(root, "transformer", corpus, MODELS["transformer"]),
    }


@pytest.fixture(scope="module")
def test_src(corpus) -> list[str]:
    return lines(corpus / "test.src")


# ---------------------------------------------------------------------------------- ensembles


def test_ensemble_steps_average_the_members_probabilities():
    torch.manual_seed(0)
    sizes = {
        "rnnsearch": dict(emb_size=16, hidden_size=32),
        "transformer": dict(d_model=32, heads=4, ff=64),
        "seq2seq": dict(emb_size=16, hidden_size=32),
    }
    members = [
        build_model(model_config(a, layers=1, **kw), 20, 20).eval() for a, kw in sizes.items()
    ]
    ens = Ensemble(members).eval()
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    mask = src != 0
    prev = torch.tensor([2, 2])
    with torch.no_grad():
        lp, state, attn = ens.decode_step(ens.init_state(ens.encode(src, mask)), prev)
        lp2, _, _ = ens.decode_step(state, torch.tensor([7, 8]))
        steps = [m.decode_step(m.init_state(m.encode(src, mask)), prev) for m in members]
    probs = torch.stack([s[0].exp() for s in steps]).mean(0)  # the hand-made average
    assert torch.allclose(lp.exp(), probs, atol=1e-6)
    assert torch.allclose(lp2.exp().sum(-1), torch.ones(2), atol=1e-5)
    # seq2seq reports no attention: the ensemble's is the mean of the other two
    assert torch.allclose(attn, (steps[0][2] + steps[1][2]) / 2, atol=1e-6)


@pytest.mark.parametrize("beam", [1, 2])
def test_ensemble_of_two_copies_equals_the_model(runs, test_src, beam):
    run = str(runs["transformer"])
    _, model, tok, _ = load_model(run)
    _, pair, _, meta = load_models([run, run])
    assert len(meta["ensemble"]) == 2
    ids = tok.encode_src(test_src)
    alone = translate_ids(model, ids, DecodeConfig(nbest=beam), beam=beam)
    both = translate_ids(pair, ids, DecodeConfig(nbest=beam), beam=beam)
    for a, b in zip(alone, both):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("beam", ["1", "2"])
def test_translate_and_evaluate_several_runs_as_one_mixed_ensemble(runs, corpus, tmp_path, beam):
    a, b = str(runs["rnnsearch"]), str(runs["transformer"])
    out = tmp_path / "out.txt"
    assert (
        main(["translate", a, b, "-i", str(corpus / "test.src"), "-o", str(out), "--beam", beam])
        == 0
    )
    assert len(lines(out)) == len(lines(corpus / "test.src"))
    assert main(["evaluate", a, b, "--beam", beam, "--report", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "hyps.txt").read_text() == out.read_text()


def test_ensemble_members_with_different_vocabularies_is_a_one_line_error(
    runs, tmp_path, tiny_corpus, capsys
):
    other = train_run(tmp_path, "other", tiny_corpus(), MODELS["rnnsearch"], max_steps=1)
    capsys.readouterr()  # the training log
    assert (
        main(["translate", str(runs["rnnsearch"]), str(other), "-i", str(tmp_path / "other.yaml")])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "vocabularies differ" in err
    assert str(runs["rnnsearch"]) in err and str(other) in err


# ---------------------------------------------------------------------------------- averaging


def test_averaging_two_copies_of_a_checkpoint_equals_the_copy(runs, corpus, tmp_path):
    best = runs["transformer"] / "best.pt"
    avg = tmp_path / "avg.pt"
    assert main(["average", str(best), str(best), "-o", str(avg)]) == 0
    original, averaged = load_checkpoint(best)["model"], load_checkpoint(avg)["model"]
    assert original.keys() == averaged.keys()
    assert all(torch.equal(original[k], averaged[k]) for k in original)
    for ckpt, name in ((best, "best"), (avg, "avg")):  # usable wherever a checkpoint is
        assert (
            main(
                [
                    "translate",
                    str(ckpt),
                    "-i",
                    str(corpus / "test.src"),
                    "-o",
                    str(tmp_path / f"{name}.txt"),
                ]
            )
            == 0
        )
    assert (tmp_path / "best.txt").read_text() == (tmp_path / "avg.txt").read_text()


def test_average_last_n_is_the_mean_of_the_last_step_checkpoints(runs, tmp_path, capsys):
    run = runs["rnnsearch"]
    steps = step_checkpoints(run)
    assert len(steps) == 3
    a, b = (load_checkpoint(p)["model"] for p in steps[-2:])
    assert main(["average", str(run), "--last", "2", "-o", str(tmp_path / "avg.pt")]) == 0
    for path in (tmp_path / "avg.pt", run / "averaged.pt"):  # by hand and by train.average_last
        avg = load_checkpoint(path)["model"]
        assert all(torch.allclose(avg[k], (a[k] + b[k]) / 2) for k in a)
    assert resolve(run) == run / "averaged.pt"  # the run's model is the average it asked for
    assert main(["average", str(run), "--last", "4", "-o", str(tmp_path / "x.pt")]) == 2
    assert "holds 3 step checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_average_last_above_keep_last_is_a_config_error(runs, tmp_path):
    from nmt.errors import NmtError

    with pytest.raises(NmtError, match="average_last"):
        cfg = yaml.safe_load((runs["rnnsearch"].parent / "rnnsearch.yaml").read_text())
        cfg["train"]["average_last"] = 5
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
        load_config(tmp_path / "c.yaml")


# ---------------------------------------------------------------------------------- scoring


@pytest.mark.parametrize("arch", MODELS)
def test_score_agrees_with_the_beams_own_hypothesis_scores(runs, corpus, tmp_path, arch):
    cfg, model, tok, _ = load_model(runs[arch])
    cpu = torch.device("cpu")
    srcs = lines(corpus / "test.src")
    with autocast_for(
        decode_precision(cfg.train.precision, cpu), cpu
    ):  # the precision `nmt score` uses
        out = translate_texts(model, tok, srcs, cfg.decode, beam=2, nbest=1)
    hyps = tmp_path / "hyps.txt"
    hyps.write_text("".join(t.text + "\n" for t in out))
    scored = tmp_path / "scores.jsonl"
    assert (
        main(
            [
                "score",
                str(runs[arch]),
                "--src",
                str(corpus / "test.src"),
                "--ref",
                str(hyps),
                "-o",
                str(scored),
                "--device",
                "cpu",  # where the beam above ran: with a GPU visible, auto would pick it
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in lines(scored)]
    assert len(rows) == len(srcs)
    for t, row in zip(out, rows):
        assert row["score"] == pytest.approx(t.hyp.score, abs=1e-4)
        assert row["norm_score"] == pytest.approx(t.scores[0], abs=1e-4)
        assert len(row["token_log_probs"]) == len(row["tokens"]) == len(t.hyp.tokens) + 1
        assert sum(row["token_log_probs"]) == pytest.approx(row["score"])


def test_score_of_an_ensemble_of_copies_equals_the_models(runs, corpus):
    run = str(runs["rnnsearch"])
    cfg, model, tok, _ = load_model(run)
    _, pair, _, _ = load_models([run, run])
    srcs, refs = lines(corpus / "test.src"), lines(corpus / "test.tgt")
    for a, b in zip(
        score_pairs(model, tok, srcs, refs, cfg.decode),
        score_pairs(pair, tok, srcs, refs, cfg.decode),
    ):
        assert a["token_log_probs"] == pytest.approx(b["token_log_probs"], abs=1e-5)


# ---------------------------------------------------------------------------------- alignments


@pytest.mark.parametrize("arch", MODELS)
@pytest.mark.parametrize("beam", ["1", "2"])
def test_alignment_files_hold_in_bounds_word_links(runs, corpus, tmp_path, arch, beam):
    src = corpus / "test.src"
    (tmp_path / "in.txt").write_text(src.read_text() + "\n")  # and one blank line
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                str(runs[arch]),
                "-i",
                str(tmp_path / "in.txt"),
                "-o",
                str(out),
                "--alignment",
                "--beam",
                beam,
            ]
        )
        == 0
    )
    inputs, outputs = lines(tmp_path / "in.txt"), lines(out)
    hard = lines(Path(str(out) + ".align"))
    soft = [json.loads(x) for x in lines(Path(str(out) + ".align.json"))]
    assert len(hard) == len(soft) == len(inputs)
    for s, t, h, j in zip(inputs, outputs, hard, soft):
        pairs = [tuple(map(int, p.split("-"))) for p in h.split()]
        assert j["src"] == s.split() and j["tgt"] == t.split()
        assert all(0 <= a < len(j["src"]) and 0 <= b < len(j["tgt"]) for a, b in pairs)
        assert sorted(b for _, b in pairs) == list(range(len(j["tgt"])))  # each word once
        assert all(sum(row) == pytest.approx(1.0, abs=1e-3) for row in j["attention"])


def test_alignment_without_an_output_file_is_an_error(runs, corpus, capsys):
    assert (
        main(["translate", str(runs["rnnsearch"]), "-i", str(corpus / "test.src"), "--alignment"])
        == 2
    )
    assert "--alignment needs -o FILE" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- prefixes


@pytest.mark.parametrize("arch", MODELS)
@pytest.mark.parametrize("beam", ["1", "2"])
def test_translations_start_with_their_prefix(runs, corpus, tmp_path, arch, beam):
    refs = lines(corpus / "test.tgt")
    prefixes = [" ".join(r.split()[:2]) if i % 3 else "" for i, r in enumerate(refs)]
    (tmp_path / "prefix.txt").write_text("".join(p + "\n" for p in prefixes))
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                str(runs[arch]),
                "-i",
                str(corpus / "test.src"),
                "-o",
                str(out),
                "--prefix",
                str(tmp_path / "prefix.txt"),
                "--beam",
                beam,
            ]
        )
        == 0
    )
    for p, t in zip(prefixes, lines(out)):
        assert t.split()[: len(p.split())] == p.split()


def test_prefix_file_of_the_wrong_length_is_an_error(runs, corpus, tmp_path, capsys):
    (tmp_path / "prefix.txt").write_text("a\n")
    assert (
        main(
            [
                "translate",
                str(runs["rnnsearch"]),
                "-i",
                str(corpus / "test.src"),
                "--prefix",
                str(tmp_path / "prefix.txt"),
            ]
        )
        == 2
    )
    assert "one prefix line per input line" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- sampling


def test_sampling_nbest_is_reproducible_with_a_seed(runs, corpus, tmp_path):
    args = [
        "translate",
        str(runs["transformer"]),
        "-i",
        str(corpus / "test.src"),
        "--sample",
        "--nbest",
        "3",
        "--temperature",
        "1.5",
        "--top-p",
        "0.9",
    ]
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        assert main([*args, "--seed", seed, "-o", str(tmp_path / name)]) == 0
    a = lines(tmp_path / "a")
    assert len(a) == 3 * len(lines(corpus / "test.src"))
    assert a == lines(tmp_path / "b")
    assert a != lines(tmp_path / "c")


def test_sampling_options_are_checked_like_config_keys(runs, corpus, capsys):
    assert (
        main(
            [
                "translate",
                str(runs["transformer"]),
                "-i",
                str(corpus / "test.src"),
                "--sample",
                "--top-p",
                "1.5",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "'decode.top_p'" in err and "<= 1.0" in err


@pytest.mark.parametrize("beam", ["1", "2"])
def test_no_repeat_ngram_output_repeats_no_word_pair(runs, corpus, tmp_path, beam):
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                str(runs["rnnsearch"]),
                "-i",
                str(corpus / "test.src"),
                "-o",
                str(out),
                "--no-repeat-ngram",
                "2",
                "--beam",
                beam,
            ]
        )
        == 0
    )
    for t in lines(out):  # word vocabulary: one token per word
        w = t.split()
        bigrams = list(zip(w, w[1:]))
        assert len(bigrams) == len(set(bigrams))
