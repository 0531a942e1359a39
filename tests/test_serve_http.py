"""`nmt serve` over a real socket against real HTTP clients: a client that sends an oversized body
in full before it reads (Python's urllib, most HTTP libraries, a raw socket) gets the 413 JSON
error, not a broken pipe, and the server goes on serving."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from nmt.api import Translator  # noqa: E402
from nmt.serve.app import Limits, create_app  # noqa: E402

LIMIT = 4000
BIG = 8 * 1024 * 1024  # an 8 MB body: far past the limit, well within what the server drains


@pytest.fixture(scope="module")
def url(tiny_transformer_run: Path):
    """A real server on 127.0.0.1 (uvicorn in a thread, as `nmt serve` runs it)."""
    app = create_app(Translator.load(tiny_transformer_run), Limits(max_bytes=LIMIT))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def oversized_json() -> bytes:
    return json.dumps({"text": ["ein Hund " * (BIG // 9)]}).encode()


def test_urllib_sending_an_oversized_body_gets_the_413_json(url):
    req = urllib.request.Request(
        f"{url}/v1/translate", oversized_json(), {"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=60)
    assert e.value.code == 413
    answer = json.loads(e.value.read())
    assert list(answer) == ["error"] and f"the limit is {LIMIT}" in answer["error"]


def raw_exchange(url: str, head: bytes, body: bytes) -> bytes:
    """Send the whole request before reading a byte, then read the answer to the end."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(head + body)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def answer_of(raw: bytes) -> tuple[str, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)


def test_a_raw_socket_that_sends_everything_first_gets_the_413_json(url):
    body = oversized_json()
    head = (
        b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    status, answer = answer_of(raw_exchange(url, head, body))
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert answer == {"error": f"request body: {len(body)} bytes, the limit is {LIMIT}"}


def test_a_chunked_oversized_body_without_a_length_gets_the_413_json(url):
    piece = b"x" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(BIG // len(piece)))
    head = (
        b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    status, answer = answer_of(raw_exchange(url, head, body + b"0\r\n\r\n"))
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert answer == {"error": f"request body: more than {LIMIT} bytes, the limit is {LIMIT}"}


def test_the_server_answers_the_next_request_after_an_oversized_one(url, tiny_transformer_run):
    sentence = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()[0]
    req = urllib.request.Request(
        f"{url}/v1/translate",
        json.dumps({"text": [sentence]}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200 and json.loads(r.read())["translations"][0]["text"]


def test_a_client_that_waits_for_100_continue_gets_the_413_without_sending_the_body(url):
    """curl's way: it sends the headers, waits, and on a 413 never sends its 8 MB."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(
            b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % BIG
        )
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    status, answer = answer_of(got)
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert answer == {"error": f"request body: {BIG} bytes, the limit is {LIMIT}"}
