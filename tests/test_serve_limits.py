"""`nmt serve` under load it must refuse or cut short: constraint lists over a limit are 4xx JSON
errors naming the limit, before any work; a request past its time stops where it runs and the
worker serves the next; /v1/health says whether the worker is idle, busy or overdue; and at its
default settings, with its address space capped at 4 GB, the server answers concurrent clients
with no 5xx and the text `nmt translate --constraints` writes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from nmt.api import Translator  # noqa: E402
from nmt.search.deadline import DeadlinePassed  # noqa: E402
from nmt.serve.app import Limits, create_app  # noqa: E402
from nmt.serve.batcher import Batcher, Options  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def translator(tiny_transformer_run: Path) -> Translator:
    return Translator.load(tiny_transformer_run)


@pytest.fixture(scope="module")
def corpus(tiny_transformer_run: Path) -> Path:
    return tiny_transformer_run.parent / "corpus"


@pytest.fixture(scope="module")
def sources(corpus: Path) -> list[str]:
    return (corpus / "test.src").read_text("utf-8").splitlines()


@pytest.fixture(scope="module")
def words(corpus: Path) -> list[str]:
    return (corpus / "test.tgt").read_text("utf-8").split()


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, Limits())) as c:
        yield c


def over_limit(words: list[str]) -> list[tuple[list, int, str]]:
    pairs = [f"{words[i % len(words)]} {words[(i + 1) % len(words)]}" for i in range(5000)]
    return [
        ([pairs], 422, "max_request_phrases"),  # the 5,000 phrases: 66 KB
        ([[words[0]] * 1000], 422, "max_request_phrases"),
        ([pairs[:40]], 422, "decode.max_phrases"),
        ([{"include": pairs[:10], "exclude": words[:10]}], 422, "decode.max_phrases"),
        ([[" ".join(words[:30])]], 422, "decode.max_phrase_words"),
        ([pairs * 6], 413, None),  # 30,000 phrases: a body over 256 KB
    ]


def test_constraints_over_a_limit_are_4xx_naming_it_and_the_server_serves_on(
    client, sources, words
):
    for constraints, status, limit in over_limit(words):
        r = client.post("/v1/translate", json={"text": sources[:1], "constraints": constraints})
        assert r.status_code == status, r.text
        assert r.json().get("limit") == limit and r.json()["error"]
    health = client.get("/v1/health").json()
    assert health["requests"] == 0 and health["failed"] == 0  # refused before any decoding
    r = client.post("/v1/translate", json={"text": sources[:1], "constraints": [[words[0]]]})
    assert r.status_code == 200 and r.json()["translations"][0]["unmet"] == 0


def test_the_model_info_lists_the_limits_on_constraints(client):
    limits = client.get("/v1/model").json()["limits"]
    assert (limits["max_phrases"], limits["max_phrase_words"]) == (16, 8)
    assert (limits["max_phrase_tokens"], limits["max_request_phrases"]) == (24, 64)


class SlowSteps:
    """The model's decode_step, each step taking `seconds` more, its start times recorded;
    `hold` makes the first step wait until released (to look at the worker meanwhile)."""

    def __init__(self, model, seconds: float, hold: bool = False) -> None:
        self.real, self.seconds, self.starts = model.decode_step, seconds, []
        self.entered, self.release = threading.Event(), threading.Event()
        self.hold = hold

    def __call__(self, state, prev):
        self.starts.append(time.monotonic())
        if self.hold and len(self.starts) == 1:
            self.entered.set()
            self.release.wait(30)
        time.sleep(self.seconds)
        return self.real(state, prev)


def test_a_request_past_its_time_stops_where_it_runs_and_the_worker_serves_the_next(
    translator, sources, monkeypatch
):
    long = [s for s in sources if len(s.split()) >= 8][:4]  # 15+ steps of 0.1 s: past 1 s
    slow = SlowSteps(translator.model, 0.1)
    monkeypatch.setattr(translator.model, "decode_step", slow)
    batcher = Batcher(translator, 2000, 0.0, 8, timeout_s=1.0)
    batcher.start()
    try:
        sent = time.monotonic()
        with pytest.raises(DeadlinePassed):
            batcher.submit(long, Options(beam=3)).result(60)
        late = [t for t in slow.starts if t > sent + 1.0]
        assert len(late) <= 1  # stopped at the first step check after its deadline
        assert batcher.stats.timed_out == 1 and batcher.state()["worker"] == "idle"
        monkeypatch.setattr(translator.model, "decode_step", slow.real)
        (r,) = batcher.submit(sources[:1], Options(beam=3)).result(60)
        assert r.text == translator.translate(sources[0], beam=3)
    finally:
        batcher.stop()


def test_health_says_whether_the_worker_is_idle_busy_or_past_the_time_limit(
    translator, sources, monkeypatch
):
    slow = SlowSteps(translator.model, 0.0, hold=True)
    monkeypatch.setattr(translator.model, "decode_step", slow)
    batcher = Batcher(translator, 2000, 0.0, 8, timeout_s=0.5)
    batcher.start()
    try:
        assert batcher.state()["worker"] == "idle"
        job = batcher.submit(sources[:2], Options(beam=3))
        assert slow.entered.wait(30)
        assert batcher.state()["worker"] == "busy"
        time.sleep(0.6)  # the deadline passes inside the held step
        assert batcher.state()["worker"] == "overdue"
        slow.release.set()
        with pytest.raises(DeadlinePassed):
            job.result(30)
        assert batcher.state() == {"worker": "idle", "busy_s": 0.0}
    finally:
        slow.release.set()
        batcher.stop()


def test_the_health_route_carries_the_workers_state(client):
    body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["worker"] == "idle" and "timed_out" in body


def test_under_a_4_gb_address_space_cap_it_answers_every_client_as_nmt_translate_does(
    tiny_transformer_run, monkeypatch
):
    """The benchmark's check (benchmarks/serve_under_memory_cap.py), with fewer requests: a
    real `nmt serve` process at its default settings, RLIMIT_AS 4,000,000 KiB."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from benchmarks.serve_under_memory_cap import check

    record = check(tiny_transformer_run, n_requests=36, n_clients=8, n_over=6)
    assert record["server_alive_after"] and not record["server_errors"], record
    assert all(400 <= o["status"] < 500 for o in record["over_limit_answers"]), record
    assert record["n_mismatches"] == 0, record["mismatches"]
    assert record["passed"] and record["statuses"].get("200") == 30
