"""One decode config per call: each entry point (`nmt translate`, `nmt evaluate`, `Translator`, the
server) takes its beam from the checkpoint's decode.beam unless told otherwise, and checks nbest
against it once, in its own user's words (`nmt.decode.decode_settings`); everything below
decodes as that config says."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from nmt.api import Translator
from nmt.cli import main
from nmt.config import DecodeConfig
from nmt.decode import decode_settings
from nmt.errors import NmtError

# tiny_transformer_run's decode.beam is 3: asking for 4 hypotheses without a beam is refused
NBEST_4 = "nbest 4 needs a beam of at least 4 (beam is 3)"


@pytest.fixture(scope="module")
def translator(tiny_transformer_run: Path) -> Translator:
    return Translator.load(tiny_transformer_run)


def test_the_settings_take_the_configs_beam_and_check_nbest_against_it():
    cfg = DecodeConfig(beam=3, nbest=2)
    assert decode_settings(cfg) is cfg  # nothing asked: the config as it was loaded
    assert decode_settings(cfg, nbest=1) == replace(cfg, nbest=1)
    assert decode_settings(cfg, beam=1) == replace(cfg, beam=1, nbest=1)  # all a beam of 1 holds
    assert decode_settings(cfg, beam=5, nbest=4) == replace(cfg, beam=5, nbest=4)
    with pytest.raises(NmtError, match=r"^--nbest 4 needs a beam of at least 4 \(beam is 3\)$"):
        decode_settings(cfg, nbest=4, name="--nbest")
    with pytest.raises(NmtError, match=r"^beam: expected at least 1, got 0$"):
        decode_settings(cfg, beam=0)
    sampled = replace(cfg, beam=1, sample=True)  # nbest samples, whatever the beam
    assert decode_settings(sampled, nbest=4).nbest == 4


def test_nmt_translate_takes_the_checkpoints_beam(tiny_transformer_run, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", "utf-8")
    args = ["translate", str(tiny_transformer_run), "-i", str(src)]
    assert main([*args, "--nbest", "4"]) == 2
    assert capsys.readouterr().err == f"nmt: error: --{NBEST_4}\n"
    assert main([*args, "--nbest", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_the_api_takes_the_checkpoints_beam(translator):
    with pytest.raises(NmtError, match=f"^{re.escape(NBEST_4)}$"):
        translator.translate(["a b"], nbest=4)
    decode = translator.decode_config(nbest=3)
    assert decode.beam == translator.info.default_beam == 3 and decode.nbest == 3
    assert translator.decode_config(beam=1).nbest == 1
    assert len(translator.translate("a b", nbest=3).nbest) == 3


def test_the_server_takes_the_checkpoints_beam(translator):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from nmt.serve.app import create_app

    with TestClient(create_app(translator)) as client:
        assert client.get("/v1/model").json()["default_beam"] == 3
        r = client.post("/v1/translate", json={"text": ["a b"], "nbest": 4})
        assert (r.status_code, r.json()) == (422, {"error": NBEST_4})
        r = client.post("/v1/translate", json={"text": ["a b"], "nbest": 3})
        assert r.status_code == 200 and len(r.json()["translations"][0]["nbest"]) == 3
