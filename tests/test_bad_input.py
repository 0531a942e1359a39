"""Every bad input through the command line: one line `nmt: error: ...` on stderr naming the file,
line or key and what was expected, exit code 2, no traceback, nothing written half-way.

Config, data, checkpoint and translation inputs are checked as a user meets them (`nmt.cli.main`);
one tiny Transformer is trained per module and its checkpoint is reused (and copied, then damaged)
by the checkpoint and translation rows. docs/reliability.md lists every row with its test.
"""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from nmt.checkpoint import FORMAT_VERSION, load_checkpoint, load_model
from nmt.cli import main
from nmt.config.load import load_config
from nmt.data.corpus import load_split
from nmt.jobs import train as train_job
from nmt.text_translation import translate_texts

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
DELETE = object()  # marks a key to remove from the base config

BASE: dict[str, Any] = {
    "data": {
        "source": "synthetic",
        "batch_tokens": 300,
        "synthetic": {
            "train": 200,
            "valid": 20,
            "test": 20,
            "lexicon": 20,
            "max_words": 8,
            "seed": 3,
        },
    },
    "vocab": {"type": "word", "size": 100},
    "model": {
        "arch": "transformer",
        "d_model": 16,
        "heads": 2,
        "ff": 32,
        "layers": 1,
        "dropout": 0.0,
        "tie_embeddings": True,
    },
    "train": {
        "max_steps": 6,
        "lr": 0.01,
        "valid_every": 1000,
        "progress": False,
        "seed": 1,
        "threads": 1,
        "device": "cpu",
    },
    "decode": {"beam": 2, "max_len_a": 1.2, "max_len_b": 4},
}


def merged(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is DELETE:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def write_config(tmp: Path, **changes: Any) -> Path:
    """BASE with `changes` merged in (DELETE removes a key); run_dir is tmp/run."""
    raw = merged(merged(BASE, {"train": {"run_dir": str(tmp / "run")}}), changes)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def nmt(capsys: pytest.CaptureFixture, *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one `nmt: error:` line, last on stderr (log lines may precede it), no traceback."""
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("nmt: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert "Traceback" not in err
    return errors[0]


def fails(capsys: pytest.CaptureFixture, *argv: Any) -> str:
    code, _, err = nmt(capsys, *argv)
    assert code == 2, err
    return error_line(err)


# ----------------------------------------------------------------------------------------------
# Config: nothing runs and no run directory appears

CONFIG_ERRORS = {
    "unknown key": (
        {"model": {"hiden_size": 64}},
        r"unknown key 'model\.hiden_size' in \S+config\.yaml; did you mean "
        r"'model\.hidden_size'\?",
    ),
    "unknown section": (
        {"traning": {"lr": 0.1}},
        r"unknown key 'traning' in \S+; did you mean 'train'\?",
    ),
    "wrong type": (
        {"train": {"max_steps": "many"}},
        r"wrong type for 'train\.max_steps' in \S+config\.yaml: expected int, got "
        r"'many'",
    ),
    "wrong type (bool)": (
        {"vocab": {"joint": "sometimes"}},
        r"wrong type for 'vocab\.joint' in \S+: expected bool",
    ),
    "choice not allowed": (
        {"train": {"precision": "fp8"}},
        r"wrong type for 'train\.precision' in \S+: expected auto \| fp32 \| bf16 \| "
        r"fp16, got 'fp8'",
    ),
    "negative lr": (
        {"train": {"lr": -0.001}},
        r"value out of range for 'train\.lr' in \S+: expected > 0\.0, got -0\.001",
    ),
    "beam 0": (
        {"decode": {"beam": 0}},
        r"value out of range for 'decode\.beam' in \S+: expected >= 1, got 0",
    ),
    "dropout 1.5": (
        {"model": {"dropout": 1.5}},
        r"value out of range for 'model\.dropout' in \S+: expected >= 0\.0 and < "
        r"1\.0, got 1\.5",
    ),
    "missing model.arch": (
        {"model": {"arch": DELETE}},
        r"missing required key 'model\.arch' in \S+config\.yaml",
    ),
    "missing data section": ({"data": DELETE}, r"missing required key 'data' in \S+"),
    "local source without path": (
        {"data": {"source": "local"}},
        r"missing required key 'data\.path' in \S+ \(data\.source is "
        r"local\)",
    ),
    "fp16 on CPU": (
        {"train": {"precision": "fp16", "device": "cpu"}},
        r"contradictory options: 'train\.precision: fp16' needs a CUDA device",
    ),
    "tied embeddings, separate vocabularies": (
        {"vocab": {"joint": False}, "model": {"tie_embeddings": True}},
        r"contradictory options in \S+: 'model\.tie_embeddings' .* needs 'vocab\.joint: true'",
    ),
    "heads do not divide d_model": (
        {"model": {"d_model": 18, "heads": 4}},
        r"'model\.d_model' \(18\) in \S+ must be divisible by "
        r"'model\.heads' \(4\)",
    ),
}


@pytest.mark.parametrize("case", list(CONFIG_ERRORS))
def test_bad_config_is_one_line_exit_2_and_creates_no_run_dir(tmp_path, capsys, case):
    changes, expected = CONFIG_ERRORS[case]
    code, out, err = nmt(capsys, "train", write_config(tmp_path, **changes))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and re.fullmatch(r"nmt: error: " + expected + r".*\n", err), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "text, at",
    [
        ("model: {arch: transformer\ndata: {source: synthetic}\n", "line 2, column 5"),
        ("data:\n  source: synthetic\n model:\n  arch: rnnsearch\n", "line 3, column 2"),
        ("data:\n\tsource: synthetic\n", "line 2, column 1"),
    ],
)
def test_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys, text, at):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    line = fails(capsys, "train", path)
    assert line.startswith(f"nmt: error: YAML syntax error in {path} at {at}: "), line


def test_config_file_that_does_not_exist(tmp_path, capsys):
    assert (
        fails(capsys, "train", tmp_path / "nope.yaml")
        == f"nmt: error: config file not found: {tmp_path / 'nope.yaml'}"
    )


def test_config_that_is_not_utf8_names_the_byte(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("data: {source: synthetic}\n# caf\xe9\n".encode("latin-1"))
    assert (
        fails(capsys, "train", path)
        == f"nmt: error: config file {path} is not UTF-8 text (byte 31)"
    )


@pytest.mark.parametrize(
    "override, expected",
    [
        ("train.lrr=0.1", "unknown key 'train.lrr' in --set; did you mean 'train.lr'?"),
        ("modle.arch=rnnsearch", "unknown key 'modle.arch' in --set; did you mean 'model.arch'?"),
        ("train.lr", "--set expects KEY=VALUE, got 'train.lr'"),
        (
            "decode.beam=0",
            "value out of range for 'decode.beam' in {cfg} (with --set overrides): "
            "expected >= 1, got 0",
        ),
        ("train.max_steps=[1", "--set train.max_steps: cannot parse value '[1'"),
    ],
)
def test_bad_set_override_names_the_key(tmp_path, capsys, override, expected):
    cfg = write_config(tmp_path)
    line = fails(capsys, "train", cfg, "--set", override)
    assert line == "nmt: error: " + expected.format(cfg=cfg)
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------------------------
# Data: the file and line are named; training never starts


def local_corpus(tmp: Path, src: list[bytes], tgt: list[bytes], **data: Any) -> Path:
    d = tmp / "corpus"
    d.mkdir(exist_ok=True)
    (d / "train.src").write_bytes(b"".join(s + b"\n" for s in src))
    (d / "train.tgt").write_bytes(b"".join(t + b"\n" for t in tgt))
    return write_config(
        tmp, data={"source": "local", "path": str(d), "splits": {"train": "train"}, **data}
    )


GOOD = [b"le dog sees un cat", b"la bird eats"]


def test_missing_data_file_is_named(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD, GOOD)
    (tmp_path / "corpus" / "train.tgt").unlink()
    assert (
        fails(capsys, "train", cfg)
        == f"nmt: error: file not found: {tmp_path / 'corpus' / 'train.tgt'}"
    )


def test_missing_data_directory_is_named(tmp_path, capsys):
    cfg = write_config(tmp_path, data={"source": "local", "path": str(tmp_path / "nowhere")})
    assert (
        fails(capsys, "train", cfg)
        == f"nmt: error: data directory not found: {tmp_path / 'nowhere'} (data.path)"
    )


def test_line_count_mismatch_names_both_files_and_counts(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD, GOOD[:1])
    d = tmp_path / "corpus"
    assert fails(capsys, "train", cfg) == (
        f"nmt: error: line counts differ: {d / 'train.src'} has 2 lines, {d / 'train.tgt'} has 1"
    )


def test_non_utf8_data_names_file_line_and_byte(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD + [b"la caf\xe9 runs"], GOOD + [b"ok"])
    assert fails(capsys, "train", cfg) == (
        f"nmt: error: {tmp_path / 'corpus' / 'train.src'}, "
        f"line 3: not valid UTF-8 (byte 0xe9 at column 7)"
    )


def test_training_set_empty_after_filtering_names_the_limits(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD, GOOD, max_len=2)
    line = fails(capsys, "train", cfg)
    assert line.startswith(
        "nmt: error: the training set is empty after filtering (train pairs: "
        "2 read, 0 kept, dropped 0 empty, 2 over max_len, 0 over max_ratio)"
    )
    assert "'data.max_len'" in line


def test_training_set_of_blank_lines_is_an_error(tmp_path, capsys):
    cfg = local_corpus(tmp_path, [b"", b"  "], [b"", b""])
    assert fails(capsys, "train", cfg) == (
        "nmt: error: cannot train a subword model: the training split has no non-empty lines"
    )


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_jsonl_language_keys_missing_names_file_and_line(tmp_path, capsys):
    d = tmp_path / "corpus"
    d.mkdir()
    write_jsonl(
        d / "train.jsonl",
        [
            {"translation": {"de": "ein hund", "en": "a dog"}},
            {"translation": {"de": "eine katze", "fr": "un chat"}},
        ],
    )
    cfg = write_config(
        tmp_path,
        data={
            "source": "local",
            "path": str(d),
            "format": "jsonl",
            "src_lang": "de",
            "tgt_lang": "en",
            "splits": {"train": "train"},
        },
    )
    assert fails(capsys, "train", cfg) == (
        f"nmt: error: {d / 'train.jsonl'}, line 2: expected "
        f"language keys 'de' and 'en' in 'translation', found "
        f"['de', 'fr']"
    )


def test_hub_split_that_does_not_exist_is_named(tmp_path, capsys):
    hub = tmp_path / "hubdata"  # datasets treats a local directory like a hub repository
    hub.mkdir()
    write_jsonl(hub / "train.jsonl", [{"translation": {"de": "ein hund", "en": "a dog"}}] * 3)
    cfg = write_config(
        tmp_path,
        data={
            "source": "hub",
            "hub_name": str(hub),
            "src_lang": "de",
            "tgt_lang": "en",
            "splits": {"train": "training"},
        },
    )
    line = fails(capsys, "train", cfg)
    assert line.startswith(f"nmt: error: split 'training' not found in hub dataset {hub}: "), line


def test_data_error_leaves_no_run_directory(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD, GOOD[:1])
    fails(capsys, "train", cfg)
    assert not (tmp_path / "run").exists()


def test_fixing_the_data_then_rerunning_the_same_command_trains(tmp_path, capsys):
    cfg = local_corpus(tmp_path, GOOD, GOOD[:1], max_len=50)
    fails(capsys, "train", cfg)
    (tmp_path / "corpus" / "train.tgt").write_bytes(b"".join(t + b"\n" for t in GOOD))
    code, _, err = nmt(capsys, "train", cfg, "--set", "train.max_steps=1")
    assert code == 0, err


# ----------------------------------------------------------------------------------------------
# Checkpoints: one shared tiny run, copied and damaged per test


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("bad_input_run")
    return train_job.train(load_config(write_config(tmp))).run


@pytest.fixture(scope="module")
def ckpt(run: Path) -> dict:
    return load_checkpoint(run / "best.pt")


def save_raw(path: Path, payload: Any) -> Path:
    torch.save(payload, path)
    return path


def with_changes(ckpt: dict, **changes: Any) -> dict:
    out = dict(ckpt)
    for key, value in changes.items():
        if value is DELETE:
            del out[key]
        else:
            out[key] = value
    return out


def test_missing_checkpoint(tmp_path, capsys):
    for command in ("translate", "evaluate"):
        assert (
            fails(capsys, command, tmp_path / "best.pt")
            == f"nmt: error: no such checkpoint or run directory: {tmp_path / 'best.pt'}"
        )


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_truncated_or_corrupt_checkpoint(run, tmp_path, capsys, damage):
    data = (run / "best.pt").read_bytes()
    bad = tmp_path / "best.pt"
    bad.write_bytes(
        {"truncated": data[: len(data) // 2], "garbage": b"\x00nmt" * 100, "empty": b""}[damage]
    )
    out = tmp_path / "out.txt"
    assert (
        fails(capsys, "translate", bad, "-i", FIXTURES / "transformer_format1.src", "-o", out)
        == f"nmt: error: checkpoint {bad} is corrupt or truncated"
    )
    assert not out.exists()


@pytest.mark.parametrize("payload", [[1, 2, 3], {"model": {}}, {"format_version": "1"}])
def test_file_that_is_not_an_nmt_checkpoint(tmp_path, capsys, payload):
    path = save_raw(tmp_path / "other.pt", payload)
    assert fails(capsys, "translate", path) == f"nmt: error: {path} is not an nmt checkpoint"


def test_state_dict_that_does_not_fit_its_architecture(ckpt, tmp_path, capsys):
    config = copy.deepcopy(ckpt["config"])
    config["model"]["d_model"] = 32  # the stored tensors are 16 wide
    path = save_raw(tmp_path / "arch.pt", with_changes(ckpt, config=config))
    line = fails(capsys, "translate", path)
    assert re.fullmatch(
        rf"nmt: error: checkpoint {re.escape(str(path))} does not fit its "
        r"'transformer' model: size mismatch for \S+: copying a param with shape "
        r"torch.Size\(\[\d+, 16\]\) from checkpoint, the shape in current model "
        r"is torch.Size\(\[\d+, 32\]\)\.",
        line,
    ), line


def test_state_dict_that_does_not_fit_its_vocabulary(ckpt, tmp_path, capsys):
    from nmt.checkpoint import tokenizer_payload
    from nmt.config import VocabConfig
    from nmt.data.tokenizer import Tokenizer

    words = [" ".join(f"w{i}x{j}" for j in range(5)) for i in range(40)]
    other = Tokenizer.build(VocabConfig(type="word", size=300), words, words, False, 1)
    path = save_raw(tmp_path / "vocab.pt", with_changes(ckpt, tokenizer=tokenizer_payload(other)))
    line = fails(capsys, "translate", path)
    assert line.startswith(
        f"nmt: error: checkpoint {path} does not fit its 'transformer' model: size mismatch for "
    )


def test_checkpoint_from_a_newer_format_is_refused(ckpt, tmp_path, capsys):
    path = save_raw(tmp_path / "new.pt", with_changes(ckpt, format_version=FORMAT_VERSION + 1))
    assert fails(capsys, "translate", path) == (
        f"nmt: error: checkpoint {path} was written by a newer nmt (format {FORMAT_VERSION + 1}, "
        f"this version reads up to {FORMAT_VERSION}); upgrade nmt"
    )


def test_checkpoint_without_its_subword_model(ckpt, tmp_path, capsys):
    path = save_raw(tmp_path / "notok.pt", with_changes(ckpt, tokenizer=DELETE))
    assert (
        fails(capsys, "translate", path)
        == f"nmt: error: checkpoint {path} carries no subword model"
    )


def test_checkpoint_with_a_corrupt_subword_model(ckpt, tmp_path, capsys):
    tok = dict(ckpt["tokenizer"], src=b"not a sentencepiece model")
    path = save_raw(tmp_path / "badtok.pt", with_changes(ckpt, tokenizer=tok))
    assert (
        fails(capsys, "translate", path)
        == f"nmt: error: the subword model in {path} is missing or corrupt"
    )


def test_checkpoint_with_a_config_this_version_does_not_know(ckpt, tmp_path, capsys):
    config = copy.deepcopy(ckpt["config"])
    config["model"]["rope"] = True
    path = save_raw(tmp_path / "future.pt", with_changes(ckpt, config=config))
    assert fails(capsys, "translate", path).startswith(
        f"nmt: error: unknown key 'model.rope' in the config stored in {path}"
    )


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_run_directory_without_a_checkpoint_yet(run, tmp_path, capsys, command):
    fresh = tmp_path / "fresh_run"  # what a run holds before its first checkpoint
    fresh.mkdir()
    for name in ("config.yaml", "spm.model"):
        shutil.copy(run / name, fresh / name)
    (fresh / "checkpoints").mkdir()
    assert (
        fails(capsys, command, fresh)
        == f"nmt: error: run directory {fresh} has no checkpoint yet (train it first)"
    )
    assert sorted(p.name for p in fresh.iterdir()) == ["checkpoints", "config.yaml", "spm.model"]


def test_evaluate_error_writes_no_report(run, tmp_path, capsys):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("le dog\nla cat\n")
    ref.write_text("a\n")
    report = tmp_path / "report"
    assert (
        fails(capsys, "evaluate", run, "--src", src, "--ref", ref, "--report", report)
        == f"nmt: error: line counts differ: {src} has 2 lines, {ref} has 1"
    )
    assert not report.exists()


# ----------------------------------------------------------------------------------------------
# Translate: one output line per input line, always


def translate(capsys, run: Path, tmp: Path, lines: list[str], *extra: Any) -> tuple[list[str], str]:
    src, out = tmp / "in.txt", tmp / "out.txt"
    src.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    code, stdout, err = nmt(capsys, "translate", run, "-i", src, "-o", out, *extra)
    assert code == 0 and stdout == "" and "Traceback" not in err, err
    return out.read_text(encoding="utf-8").split("\n")[:-1], err


def test_empty_input_gives_empty_output_and_exit_0(run, tmp_path, capsys):
    src = tmp_path / "empty.txt"
    src.write_bytes(b"")
    code, out, err = nmt(capsys, "translate", run, "-i", src)
    assert (code, out) == (0, "") and "error" not in err
    assert translate(capsys, run, tmp_path, [])[0] == []


def test_blank_lines_stay_blank_and_in_place(run, tmp_path, capsys):
    words = source_words(run)
    a, b = " ".join(words[:3]), " ".join(words[3:5])
    out, _ = translate(capsys, run, tmp_path, [a, "", "   ", b])
    alone, _ = translate(capsys, run, tmp_path, [a, b])
    assert out == [alone[0], "", "", alone[1]]


def source_words(run: Path) -> list[str]:
    src, _ = load_split(load_config(run / "config.yaml").data, "train")
    return " ".join(src).split()


def test_overlong_line_is_truncated_with_a_warning_never_dropped(run, tmp_path, capsys):
    words = source_words(run)
    long = " ".join(words[i % len(words)] for i in range(5000))
    out, err = translate(capsys, run, tmp_path, ["le", long, "la"], "--beam", "1")
    assert len(out) == 3
    cfg, model, tok, _ = load_model(run)
    limit = cfg.decode.max_input_tokens
    assert (
        f"{tmp_path / 'in.txt'} line 2: 5000 subword tokens, truncated to {limit} "
        f"(decode.max_input_tokens)" in err
    )
    assert err.count("truncated") == 1
    # the model saw the first `limit` tokens and EOS, and translated them
    (seen,) = translate_texts(model, tok, [long], cfg.decode, beam=1)
    assert seen.src_pieces[:-1] == tok.src_pieces(tok.encode_src([long])[0][:limit])
    assert seen.src_pieces[-1] == "</s>" and seen.hyp is not None


def test_mixed_scripts_and_emoji_translate_without_crashing(run, tmp_path, capsys):
    lines = [
        "Привет мир",
        "你好，世界",
        "مرحبا بالعالم",
        "👋🏽 🇫🇷 e\u0301",
        "le " + "🙂" * 50,
        "\u200b\u200d\ufeff",
    ]
    out, _ = translate(capsys, run, tmp_path, lines)
    assert len(out) == len(lines)


def test_non_utf8_input_file_names_the_line(run, tmp_path, capsys):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_bytes(b"le dog\nla \xff cat\n")
    assert (
        fails(capsys, "translate", run, "-i", src, "-o", out)
        == f"nmt: error: {src}, line 2: not valid UTF-8 (byte 0xff at column 4)"
    )
    assert not out.exists()


def test_non_utf8_stdin_names_the_line(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\nok\n\xc3\x28\n")))
    assert (
        fails(capsys, "translate", run)
        == "nmt: error: stdin, line 3: not valid UTF-8 (byte 0xc3 at column 1)"
    )


def test_nbest_larger_than_the_beam(run, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("le\n")
    assert (
        fails(capsys, "translate", run, "-i", src, "--beam", "2", "--nbest", "3")
        == "nmt: error: --nbest 3 needs a beam of at least 3 (beam is 2)"
    )


# ----------------------------------------------------------------------------------------------
# Compatibility: a checkpoint written by an earlier build of this format still works


def test_committed_checkpoint_still_loads_and_translates(tmp_path, capsys):
    fixture = FIXTURES / f"transformer_format{FORMAT_VERSION}.pt"
    src = FIXTURES / f"transformer_format{FORMAT_VERSION}.src"
    assert load_checkpoint(fixture)["format_version"] == FORMAT_VERSION
    out = tmp_path / "out.txt"
    assert nmt(capsys, "translate", fixture, "-i", src, "-o", out)[0] == 0
    hyps = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == len(src.read_text().splitlines()) == 3
    assert any(h.strip() for h in hyps)


# ----------------------------------------------------------------------------------------------
# Safety: checkpoints and configs never run code


class Payload:
    """Unpickling this calls os.makedirs(marker): what a malicious checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return os.makedirs, (self.marker,)


def test_checkpoint_carrying_a_pickled_object_is_refused_and_runs_nothing(ckpt, tmp_path, capsys):
    marker = tmp_path / "pwned"
    path = save_raw(tmp_path / "evil.pt", with_changes(ckpt, model=Payload(marker)))
    for command in ("translate", "evaluate"):
        assert fails(capsys, command, path) == (
            f"nmt: error: refusing to load {path}: it contains pickled Python objects that "
            f"could run code (only tensors and plain data are allowed)"
        )
    assert not marker.exists()
    # the payload is live: an unsafe load would have run it
    torch.load(path, weights_only=False)
    assert marker.is_dir()


@pytest.mark.parametrize(
    "tag",
    ["!!python/object/apply:os.system ['touch {m}']", "!!python/object/apply:os.makedirs ['{m}']"],
)
def test_config_with_a_python_tag_is_refused_and_runs_nothing(tmp_path, capsys, tag):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"data: {{source: synthetic}}\nmodel: {{arch: {tag.format(m=marker)}}}\n")
    line = fails(capsys, "train", path)
    assert line.startswith(f"nmt: error: YAML tag not allowed in {path} at line 2")
    assert "could not determine a constructor for the tag" in line
    line = fails(
        capsys, "train", write_config(tmp_path), "--set", f"model.arch={tag.format(m=marker)}"
    )
    assert line == f"nmt: error: --set model.arch: cannot parse value {tag.format(m=marker)!r}"
    assert not marker.exists()


RISKY = {
    "eval(": re.compile(r"(?<![\w.])eval\("),
    "exec(": re.compile(r"(?<![\w.])exec\("),
    "os.system": re.compile(r"\bos\.system\b"),
    "subprocess": re.compile(r"\bsubprocess\b"),
    "shell=True": re.compile(r"shell\s*=\s*True"),
    "pickle.load": re.compile(r"\bpickle\.loads?\("),
    "yaml.load / unsafe_load": re.compile(r"\byaml\.(load|unsafe_load|full_load)\("),
    "weights_only=False": re.compile(r"weights_only\s*=\s*False"),
}


def test_package_source_has_no_code_execution_on_inputs():
    sources = {p: p.read_text(encoding="utf-8") for p in sorted((REPO / "nmt").rglob("*.py"))}
    found = [
        f"{p.relative_to(REPO)}:{n}: {name}"
        for p, text in sources.items()
        for n, line in enumerate(text.splitlines(), 1)
        for name, rx in RISKY.items()
        if rx.search(line)
    ]
    assert found == []
    # and the loaders in use are the safe ones
    torch_loads = [
        args for text in sources.values() for args in re.findall(r"torch\.load\(([^)]*)\)", text)
    ]
    assert torch_loads and all("weights_only=True" in a for a in torch_loads)
    assert any("yaml.safe_load(" in text for text in sources.values())
