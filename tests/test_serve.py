"""`nmt serve` over HTTP (FastAPI's TestClient): answers equal `nmt translate`'s, every bad input
is a 4xx JSON error naming its field, merged batches answer as if each request were alone, a full
queue answers 503 and a slow answer 504, and no request takes the model down."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from nmt.api import Sampling, Translator  # noqa: E402
from nmt.cli import main  # noqa: E402
from nmt.config import DataConfig, SyntheticConfig  # noqa: E402
from nmt.data.synthetic import write_corpus  # noqa: E402
from nmt.precision import decode_precision  # noqa: E402
from nmt.serve.app import Limits, create_app  # noqa: E402
from nmt.serve.batcher import Batcher, Options  # noqa: E402
from nmt.serve.example import example_sentence  # noqa: E402


@pytest.fixture(scope="module")
def translator(tiny_transformer_run: Path) -> Translator:
    return Translator.load(tiny_transformer_run)


@pytest.fixture(scope="module")
def sources(tiny_transformer_run: Path) -> list[str]:
    corpus = tiny_transformer_run.parent / "corpus"
    return (corpus / "test.src").read_text("utf-8").splitlines()[:12]


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, Limits(max_sentences=8, max_bytes=4000))) as c:
        yield c


class Held:
    """A translator whose decoding waits until released (to fill the queue), or fails for one
    poisoned text; everything else is the real one."""

    def __init__(self, real: Translator, poison: str = "") -> None:
        self.real, self.poison = real, poison
        self.release, self.started = threading.Event(), threading.Event()
        self.release.set()

    def __getattr__(self, name):
        return getattr(self.real, name)

    def translate(self, texts, **kw):
        self.started.set()
        self.release.wait(10)
        if self.poison in texts:
            raise RuntimeError("a bug hit by one request")
        return self.real.translate(texts, **kw)


def post(client, body) -> tuple[int, dict]:
    kw = {"content": body} if isinstance(body, bytes) else {"json": body}
    r = client.post("/v1/translate", **kw)
    return r.status_code, r.json()


# ---------------------------------------------------------------------------------- answers


def test_translations_equal_nmt_translate(client, tiny_transformer_run, sources, tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(s + "\n" for s in sources[:8]), "utf-8")
    assert main(["translate", str(tiny_transformer_run), "-i", str(src), "-o", str(out)]) == 0
    status, body = post(client, {"text": sources[:8]})
    assert status == 200
    assert [t["text"] for t in body["translations"]] == out.read_text("utf-8").splitlines()
    assert body["model"]["arch"] == "transformer" and body["time_ms"] > 0


def test_response_carries_nbest_pieces_and_alignment(client, sources):
    status, body = post(client, {"text": sources[:2], "beam": 3, "nbest": 2, "alignment": True})
    assert status == 200
    for t in body["translations"]:
        assert len(t["nbest"]) == 2 and t["nbest"][0]["text"] == t["text"]
        assert len(t["alignment"]) == len(t["tgt_pieces"])
        assert {len(row) for row in t["alignment"]} == {len(t["src_pieces"])}
    status, body = post(client, {"text": sources[:1]})
    assert body["translations"][0]["alignment"] is None


def test_overlong_sentence_is_truncated_with_a_warning(client, sources):
    status, body = post(client, {"text": [" ".join(sources[:6])]})
    (t,) = body["translations"]
    assert status == 200 and t["text"] and "truncated" in t["warnings"][0]


def test_unknown_words_are_reported_in_the_answer(client, tiny_transformer_run):
    """The API used to answer `src_pieces: ['<unk>', ...]` and `warnings: []`."""
    train = (tiny_transformer_run.parent / "corpus" / "train.src").read_text("utf-8")
    known = train.splitlines()[0]
    status, body = post(client, {"text": [known, known + " zzyzx"]})
    assert status == 200
    plain, odd = body["translations"]
    assert plain["warnings"] == []
    n = len(known.split()) + 1
    assert odd["warnings"] == [f"1 of {n} words are not in the model's vocabulary: zzyzx"]


def test_sampling_is_reachable_over_http(client, translator, sources):
    """4 samples with the checkpoint's beam of 3 (sampling has no beam), as the API draws them
    with the server's batch budget."""
    body = {"text": sources[:2], "sample": True, "nbest": 4, "temperature": 1.5, "seed": 5}
    status, answer = post(client, body)
    assert status == 200
    direct = translator.translate(
        sources[:2], nbest=4, sampling=Sampling(temperature=1.5, seed=5), batch_tokens=2000
    )
    got = [[h["text"] for h in t["nbest"]] for t in answer["translations"]]
    assert got == [[h.text for h in r.nbest] for r in direct]
    status, answer = post(client, {**body, "temperature": 0})
    assert status == 422 and answer["error"].startswith("temperature:")


def test_health_model_page_and_openapi(client):
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    model = client.get("/v1/model").json()
    assert model["step"] == 40 and model["attention_layers"] == 2 and model["parameters"] > 0
    # decodes in the run's precision, as nmt translate does (bf16 where the CPU has bf16 units)
    translator = client.app.state.translator
    assert model["precision"] == decode_precision(translator.cfg.train.precision, translator.device)
    page = client.get("/")
    assert page.status_code == 200 and 'id="heatmap"' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # nothing from a CDN
    for asset in ("app.js", "style.css"):
        assert client.get(f"/static/{asset}").status_code == 200
    schema = client.get("/openapi.json").json()
    request = schema["paths"]["/v1/translate"]["post"]["requestBody"]["content"]
    assert set(request["application/json"]["schema"]["properties"]) >= {
        "text",
        "beam",
        "nbest",
        "alignment",
    }


def test_the_model_info_carries_an_example_from_the_runs_own_test_split(client, sources):
    """The page's placeholder: the run's first test sentence, not German for any model."""
    assert client.get("/v1/model").json()["example"] == sources[0]


def test_the_example_sentence_comes_from_the_split_the_model_was_trained_for(tmp_path):
    synthetic = DataConfig(source="synthetic", synthetic=SyntheticConfig(test=5, seed=4))
    write_corpus(tmp_path / "syn", synthetic.synthetic)  # what training would read
    first = (tmp_path / "syn" / "test.src").read_text("utf-8").splitlines()[0]
    assert example_sentence(synthetic) == first
    local = DataConfig(source="local", path=str(tmp_path / "here"), src_lang="de", tgt_lang="en")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "val.de").write_text("\nein Hund .\n", "utf-8")  # a blank line first
    (tmp_path / "here" / "val.en").write_text("\na dog .\n", "utf-8")
    local = replace(local, splits={"train": "train", "valid": "val"})
    assert example_sentence(local) == "ein Hund ."  # no test split: the validation one
    gone = replace(local, path=str(tmp_path / "elsewhere"))  # served on another machine
    assert example_sentence(gone) is None
    assert example_sentence(DataConfig(source="hub", hub_name="wmt14")) is None  # never fetched


# ---------------------------------------------------------------------------------- bad input

BAD = [
    (b"{not json", 400, "invalid JSON"),
    (b'{"text": ["\xff\xfe ein Hund"]}', 400, "not valid UTF-8"),
    (b'["a list"]', 422, "expected a JSON object"),
    ({"txt": ["a"]}, 422, "text: required field missing"),
    ({"text": ["a"], "colour": "red"}, 422, "colour: unknown field"),
    ({"text": "a string"}, 422, "text: input should be a valid list"),
    ({"text": ["ok", 7]}, 422, "text.1: input should be a valid string"),
    ({"text": []}, 422, "text: expected a non-empty list"),
    ({"text": ["a"], "beam": "5"}, 422, "beam: input should be a valid integer"),
    ({"text": ["a"], "beam": 0}, 422, "beam: input should be greater than or equal to 1"),
    ({"text": ["a"], "beam": 17}, 422, "beam: expected at most 16"),
    ({"text": ["a"], "beam": 2, "nbest": 3}, 422, "nbest 3 needs a beam of at least 3 (beam is 2)"),
    ({"text": ["a"], "nbest": 0}, 422, "nbest: input should be greater than or equal to 1"),
    ({"text": ["a"], "alignment": "yes"}, 422, "alignment: input should be a valid boolean"),
    ({"text": ["a"], "attention_layer": 2}, 422, "attention_layer: expected -2..1"),
    ({"text": ["a"], "attention_head": -1}, 422, "attention_head: expected 0..1 or null"),
    (b'{"text": ["\\ud800"]}', 422, "text.0: not valid Unicode"),
    ({"text": ["a"] * 9}, 413, "text: 9 sentences, the limit is 8"),
    ({"text": ["a" * 5000]}, 413, "the limit is 4000"),
]


@pytest.mark.parametrize("body, status, message", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_is_a_4xx_json_error_naming_the_field(client, body, status, message):
    got, answer = post(client, body)
    assert (got, list(answer)) == (status, ["error"])
    assert message in answer["error"]


def test_bad_inputs_leave_the_model_serving(client, sources):
    for body, _, _ in BAD:
        post(client, body)
    status, body = post(client, {"text": sources[:1]})
    assert status == 200 and body["translations"][0]["text"]


def test_unknown_route_and_method_are_json_errors(client):
    assert client.get("/v1/nothing").json() == {"error": "Not Found"}
    r = client.get("/v1/translate")
    assert r.status_code == 405 and "error" in r.json()


# ---------------------------------------------------------------------------------- batching


def test_answer_is_the_same_whatever_else_is_in_the_batch(translator, sources):
    """Requests queued together are decoded as one padded batch; each answer equals decoding
    that request alone (text, scores, pieces and alignment)."""
    options = Options(beam=3, nbest=2, alignment=True)
    alone = [translator.translate([s], beam=3, nbest=2, alignment=True)[0] for s in sources]
    held = Held(translator)
    batcher = Batcher(held, max_batch_tokens=10_000, max_wait_ms=2000, queue_size=64)
    futures = [batcher.submit([s], options) for s in sources]  # all queued before the start
    batcher.start()
    try:
        merged = [f.result(30)[0] for f in futures]
    finally:
        batcher.stop()
    assert batcher.stats.batches == 1 and batcher.stats.requests == len(sources)
    assert [m.text for m in merged] == [a.text for a in alone]
    for m, a in zip(merged, alone):
        assert [h.text for h in m.nbest] == [h.text for h in a.nbest]
        assert [h.score for h in m.nbest] == pytest.approx([h.score for h in a.nbest], abs=1e-4)
        assert m.tgt_pieces == a.tgt_pieces and m.src_pieces == a.src_pieces
        assert [w for row in m.alignment for w in row] == pytest.approx(
            [w for row in a.alignment for w in row], abs=1e-3
        )


def test_token_budget_splits_batches_and_zero_turns_merging_off(translator, sources):
    for budget, most in ((30, None), (0, len(sources))):
        batcher = Batcher(translator, max_batch_tokens=budget, max_wait_ms=500, queue_size=64)
        futures = [batcher.submit([s], Options(beam=1)) for s in sources]
        batcher.start()
        try:
            [f.result(30) for f in futures]
        finally:
            batcher.stop()
        assert 1 < batcher.stats.batches <= len(sources)
        if most:
            assert batcher.stats.batches == most


def test_the_worker_stops_waiting_once_the_answered_clients_are_back(translator, sources):
    """After a batch of two, the next batch waits for two arrivals, not for max_wait_ms: under a
    steady load each batch holds every client instead of alternating halves of them."""
    batcher = Batcher(translator, max_batch_tokens=10_000, max_wait_ms=3000, queue_size=64)
    first = [batcher.submit([s], Options(beam=1)) for s in sources[:2]]
    batcher.start()
    try:
        [f.result(30) for f in first]  # waited max_wait_ms: nobody had been answered
        again = [batcher.submit([sources[2]], Options(beam=1))]
        time.sleep(0.3)  # the second client comes back later
        again.append(batcher.submit([sources[3]], Options(beam=1)))
        [f.result(30) for f in again]
    finally:
        batcher.stop()
    assert batcher.stats.batches == 2 and batcher.stats.requests == 4
    # why each batch closed: the first ran out its wait, the second had both clients back
    assert (batcher.stats.closed_max_wait, batcher.stats.closed_returned) == (1, 1)


class Slow:
    """The real translator, one second slower per batch."""

    def __init__(self, real: Translator) -> None:
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def translate(self, texts, **kw):
        time.sleep(1.0)
        return self.real.translate(texts, **kw)


def test_answered_clients_are_awaited_for_a_share_of_the_decoding_time(translator, sources):
    """max_wait_ms 0, but the last batch took over a second: a client it answered that comes back
    0.2 s after another still joins their batch (the wait is capped by comeback_share of the
    decoding time, here a half)."""
    batcher = Batcher(Slow(translator), max_batch_tokens=10_000, max_wait_ms=0, queue_size=64)
    batcher.comeback_share = 0.5
    first = [batcher.submit([s], Options(beam=1)) for s in sources[:2]]
    batcher.start()
    try:
        [f.result(30) for f in first]
        again = [batcher.submit([sources[2]], Options(beam=1))]
        time.sleep(0.2)
        again.append(batcher.submit([sources[3]], Options(beam=1)))
        [f.result(30) for f in again]
    finally:
        batcher.stop()
    assert batcher.stats.batches == 2 and batcher.stats.closed_returned == 1


def test_requests_with_other_options_wait_for_their_own_batch(translator, sources):
    batcher = Batcher(translator, max_batch_tokens=10_000, max_wait_ms=500, queue_size=64)
    greedy = [batcher.submit([s], Options(beam=1)) for s in sources[:3]]
    beam = [batcher.submit([s], Options(beam=3)) for s in sources[:3]]
    batcher.start()
    try:
        got = [f.result(30)[0].text for f in greedy + beam]
    finally:
        batcher.stop()
    assert batcher.stats.batches == 2
    assert got == [translator.translate([s], beam=b)[0].text for b in (1, 3) for s in sources[:3]]


def test_a_failing_request_fails_alone_and_the_worker_lives_on(translator, sources):
    held = Held(translator, poison="boom")
    batcher = Batcher(held, max_batch_tokens=10_000, max_wait_ms=500, queue_size=64)
    good = [batcher.submit([s], Options(beam=1)) for s in sources[:3]]
    bad = batcher.submit(["boom"], Options(beam=1))
    batcher.start()
    try:
        assert [f.result(30)[0].text for f in good] == [
            translator.translate([s], beam=1)[0].text for s in sources[:3]
        ]
        with pytest.raises(RuntimeError, match="a bug hit by one request"):
            bad.result(30)
        after = batcher.submit([sources[0]], Options(beam=1)).result(30)
    finally:
        batcher.stop()
    assert after[0].text and batcher.stats.failed == 1


def test_a_cancelled_request_is_never_decoded(translator, sources):
    held = Held(translator)
    batcher = Batcher(held, max_batch_tokens=0, max_wait_ms=0, queue_size=64)
    held.release.clear()
    batcher.start()
    first = batcher.submit([sources[0]], Options(beam=1))
    assert held.started.wait(10)  # the worker is busy with the first request
    gone = batcher.submit([sources[1]], Options(beam=1))
    gone.cancel()  # what a timeout or a disconnect does
    held.release.set()
    first.result(30)
    last = batcher.submit([sources[2]], Options(beam=1))
    last.result(30)
    batcher.stop()
    assert batcher.stats.cancelled == 1 and batcher.stats.requests == 2


# ---------------------------------------------------------------------------------- overload


def test_full_queue_answers_503_with_retry_after_and_slow_answers_504(translator, sources):
    held = Held(translator)
    app = create_app(held, Limits(queue=1, timeout_s=1.5, max_batch_tokens=0))
    with TestClient(app) as c:
        held.release.clear()
        answers: list[int] = []
        first = threading.Thread(
            target=lambda: answers.append(
                c.post("/v1/translate", json={"text": sources[:1]}).status_code
            )
        )
        first.start()
        assert held.started.wait(10)  # decoding (held), so the queue is empty
        second = threading.Thread(
            target=lambda: answers.append(
                c.post("/v1/translate", json={"text": sources[1:2]}).status_code
            )
        )
        second.start()
        deadline = time.monotonic() + 10
        while app.state.batcher.queued() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        r = c.post("/v1/translate", json={"text": sources[2:3]})
        assert r.status_code == 503 and "queue is full" in r.json()["error"]
        assert int(r.headers["Retry-After"]) >= 1
        first.join(20)
        second.join(20)
        assert sorted(answers) == [504, 504]  # held past the 1.5 s timeout
        held.release.set()
        status, body = post(c, {"text": sources[:1]})
        assert status == 200 and body["translations"][0]["text"]


# ---------------------------------------------------------------------------------- command


def test_serve_without_the_extra_says_how_to_install_it(monkeypatch, capsys, tiny_transformer_run):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve", str(tiny_transformer_run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[serve]"' in err


def test_a_client_that_disconnects_is_never_decoded(translator, sources):
    """Over a real socket (uvicorn in a thread): the second client hangs up while the worker is
    busy, and its request is dropped instead of decoded."""
    import socket

    import uvicorn

    held = Held(translator)
    app = create_app(held, Limits(max_batch_tokens=0))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        held.release.clear()
        answers: list[int] = []

        def first() -> None:
            import http.client

            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request(
                "POST",
                "/v1/translate",
                json.dumps({"text": sources[:1]}),
                {"Content-Type": "application/json"},
            )
            answers.append(c.getresponse().status)

        busy = threading.Thread(target=first)
        busy.start()
        assert held.started.wait(10)
        body = json.dumps({"text": sources[1:2]}).encode()
        with socket.create_connection(("127.0.0.1", port)) as hangs_up:
            hangs_up.sendall(
                b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            deadline = time.monotonic() + 10
            while app.state.batcher.queued() < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        deadline = time.monotonic() + 10  # the hang-up drops it from the queue
        while app.state.batcher.queued() > 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        held.release.set()
        busy.join(30)
        assert answers == [200]
        assert app.state.batcher.stats.cancelled == 1 and app.state.batcher.stats.requests == 1
    finally:
        held.release.set()
        server.should_exit = True
        thread.join(30)
