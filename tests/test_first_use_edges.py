"""Rough edges a new user hit: `Translator.translate` of one string, `nmt serve` on a busy port,
error messages that name the real problem (a file that is no checkpoint, a folder that is no run,
an output folder that does not exist, a misspelled request field), where `nmt compare` and
`nmt curves` write by default, and `nmt evaluate` of an imported model, which has no data."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from nmt.cli import main

ROOT = Path(__file__).resolve().parents[1]


def error_line(capsys) -> str:
    """The command's stderr, which must be exactly one `nmt: error:` line."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nmt: error: "), err
    return err.rstrip("\n")


@pytest.fixture
def run_copy(tiny_transformer_run: Path, tmp_path: Path) -> Path:
    """A copy of the shared tiny run, for commands that write into their run."""
    return Path(shutil.copytree(tiny_transformer_run, tmp_path / "run"))


@pytest.fixture(scope="module")
def test_src(tiny_transformer_run: Path) -> Path:
    return tiny_transformer_run.parent / "corpus" / "test.src"


# ----------------------------------------------------------------------- Translator.translate


def test_a_string_gives_a_string_and_a_list_gives_a_list(tiny_transformer_run, test_src):
    from nmt.api import Translator

    t = Translator.load(tiny_transformer_run)
    text = test_src.read_text("utf-8").splitlines()[0]
    one = t.translate(text)
    assert isinstance(one, str) and one.strip()  # not one result per character
    assert one == one.text == t.translate([text])[0]
    (listed,) = t.translate([text])
    assert isinstance(listed, str) and listed.warnings == one.warnings
    options = {"beam": 3, "nbest": 2, "alignment": True}
    rich = t.translate(text, **options)
    assert rich == t.translate([text], **options)[0]
    assert len(rich.nbest) == 2 and rich.alignment is not None
    assert t.translate((text,)) == [one]  # any sequence of strings is a list of texts


# ----------------------------------------------------------------------- nmt serve


def test_serve_on_a_busy_port_is_one_error_line_and_no_serving_line(tiny_transformer_run, capsys):
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["serve", str(tiny_transformer_run), "--port", str(port)])
    line = error_line(capsys)
    assert code == 2
    assert line.startswith(f"nmt: error: 127.0.0.1:{port} is already in use"), line


def test_serve_announces_the_port_it_holds_and_logs_each_request(tiny_transformer_run):
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", str(tiny_transformer_run), "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            found = re.search(r" on http://127\.0\.0\.1:(\d+)/$", line.rstrip("\n"))
            if found or not line:
                break
        assert found, "".join(seen)
        port = int(found.group(1))
        assert port != 0  # --port 0: the port the system chose, not 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=30) as r:
            assert json.loads(r.read())["status"] == "ok"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert re.search(r'"GET /v1/health HTTP/1\.1" 200', out), out  # the access log


# ----------------------------------------------------------------------- messages


def test_a_file_that_is_no_checkpoint_is_called_so(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# nmt\n\nA toolkit.\n", "utf-8")
    assert main(["translate", str(readme)]) == 2
    assert error_line(capsys) == (
        f"nmt: error: {readme} is not an nmt checkpoint (a .pt file written by nmt train) "
        f"or run directory"
    )


def test_a_folder_that_is_no_run_is_called_so(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# docs\n", "utf-8")
    assert main(["translate", str(docs)]) == 2
    assert error_line(capsys).startswith(
        f"nmt: error: {docs} is not a run directory (it has no config.yaml)"
    )


def test_an_output_folder_that_does_not_exist_is_named(
    tiny_transformer_run, test_src, tmp_path, capsys
):
    out = tmp_path / "missing" / "dir" / "out.txt"
    args = ["translate", str(tiny_transformer_run), "-i", str(test_src), "-o", str(out)]
    assert main(args) == 2
    assert error_line(capsys) == (
        f"nmt: error: cannot write {out}: its folder {out.parent} does not exist (create it first)"
    )


def test_a_misspelled_request_field_is_named_with_the_one_it_was_meant_as(tiny_transformer_run):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.api import Translator
    from nmt.serve.app import create_app

    with TestClient(create_app(Translator.load(tiny_transformer_run))) as client:
        r = client.post("/v1/translate", json={"txt": ["un tager"]})
    assert r.status_code == 422
    assert r.json() == {
        "error": "txt: unknown field (did you mean 'text'?); text: required field missing"
    }


# ----------------------------------------------------------------------- default output places


def test_compare_writes_into_the_first_run_by_default(run_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for beam in ("1", "2"):
        assert main(["evaluate", str(run_copy), "--split", "test", "--beam", beam]) == 0
    reports = [str(run_copy / "eval_test_beam1"), str(run_copy / "eval_test_beam2")]
    assert main(["compare", *reports, "--bootstrap", "0"]) == 0
    assert (run_copy / "compare" / "compare.md").is_file()
    assert capsys.readouterr().out.endswith(f"plot: {run_copy / 'compare' / 'compare.png'}\n")
    other = Path(shutil.copytree(run_copy, tmp_path / "other"))
    shutil.rmtree(other / "compare")
    assert main(["compare", str(other), str(run_copy), "--beam", "1", "--bootstrap", "0"]) == 0
    assert (other / "compare" / "compare.png").is_file()
    # a report outside any run: compare/ beside it
    outside = tmp_path / "reports" / "greedy"
    assert main(["evaluate", str(run_copy), "--beam", "1", "--report", str(outside)]) == 0
    assert main(["compare", str(outside), reports[1], "--bootstrap", "0"]) == 0
    assert (tmp_path / "reports" / "compare" / "compare.json").is_file()
    assert not (tmp_path / "compare").exists()  # nothing where the user stands


def test_curves_write_into_the_first_run_by_default(tmp_path, monkeypatch, capsys):
    runs = []
    for name, bleu in (("a", 10.0), ("b", 20.0)):
        run = tmp_path / name
        run.mkdir()
        row = {"step": 100, "split": "valid", "bleu": bleu, "seconds": 60.0}
        (run / "metrics.jsonl").write_text(json.dumps(row) + "\n")
        runs.append(str(run))
    monkeypatch.chdir(tmp_path)
    assert main(["curves", *runs]) == 0
    assert (tmp_path / "a" / "curves" / "curves.png").is_file()
    assert capsys.readouterr().out.endswith(f"plot: {tmp_path / 'a' / 'curves' / 'curves.png'}\n")
    assert not (tmp_path / "curves").exists()


def test_compare_and_curves_help_say_where_they_write(capsys):
    for command, place in (("compare", "RUN/compare"), ("curves", "RUN/curves")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert place in " ".join(capsys.readouterr().out.split())


# ----------------------------------------------------------------------- an imported model


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    from hf_models import marian_dir, synthetic_corpus

    root = tmp_path_factory.mktemp("imported")
    corpus = synthetic_corpus(root / "corpus", train=200, test=10)
    run = root / "run"
    assert main(["import", "hf", str(marian_dir(root / "marian", corpus)), "-o", str(run)]) == 0
    return run


def test_evaluating_an_imported_model_without_files_asks_for_them(imported, capsys):
    capsys.readouterr()
    for target in (imported, imported / "best.pt"):
        assert main(["evaluate", str(target), "--beam", "1"]) == 2
        line = error_line(capsys)
        assert line.startswith(f"nmt: error: {target} is a model imported from "), line
        assert line.endswith(
            "has no data of its own (data.path "
            f"{imported.resolve() / 'data'} is a placeholder): evaluate it "
            "on files with --src FILE --ref FILE"
        ), line


def test_an_imported_model_evaluates_on_files(imported, capsys):
    corpus = imported.parent / "corpus"
    src, ref = corpus / "test.src", corpus / "test.tgt"
    args = ["evaluate", str(imported), "--beam", "1", "--src", str(src), "--ref", str(ref)]
    assert main([*args, "--bootstrap", "0"]) == 0
    assert (imported / "eval_file_test_beam1" / "scores.json").is_file()
