"""The page of `nmt serve` in a real browser: headless Debian chromium driven by Playwright
against a real `nmt serve` process. Type a sentence, click Translate: the text shown equals
`nmt translate`'s and the heatmap has one row per target piece. Skips without playwright or
/usr/bin/chromium, unless NMT_REQUIRE_BROWSER is set: CI sets it (and installs both, see
.ci/run), so there a missing browser fails instead of skipping."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[1]
NEEDED = ("fastapi", "uvicorn", "playwright.sync_api")


def missing_browser() -> str | None:
    """What the page's tests lack here (a module or chromium), or None."""
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            return f"{name} is not installed (pip install -e '.[serve]' playwright)"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not found (apt-get install chromium)"
    return None


def browser_gate(missing: str | None) -> pytest.MarkDecorator:
    """A skip mark for the page's tests where the browser is `missing`; a failure instead when
    NMT_REQUIRE_BROWSER is set, so that CI cannot pass without running them."""
    if missing and os.environ.get("NMT_REQUIRE_BROWSER"):
        pytest.fail(f"{missing}, and NMT_REQUIRE_BROWSER is set", pytrace=False)
    return pytest.mark.skipif(missing is not None, reason=missing or "")


needs_browser = browser_gate(missing_browser())


def test_without_a_browser_the_page_tests_skip_unless_it_is_required(monkeypatch):
    monkeypatch.delenv("NMT_REQUIRE_BROWSER", raising=False)
    assert browser_gate("chromium not found").args == (True,)
    assert browser_gate(None).args == (False,)
    monkeypatch.setenv("NMT_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="chromium not found"):
        browser_gate("chromium not found")
    assert browser_gate(None).args == (False,)


def test_ci_requires_the_browser_and_fails_when_chromium_cannot_be_installed():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    at = ci.index("apt-get install")
    install = ci[ci.rindex("\nif ", 0, at) : ci.index("\nfi", at)]  # the install's if-block
    assert "chromium" in install and "||" not in install, install  # set -e: a failure stops CI
    assert 0 <= ci.find("\nexport NMT_REQUIRE_BROWSER=1\n") < ci.rindex("\npytest")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def serving(run: Path) -> Iterator[str]:
    """`nmt serve RUN --port P` as a user starts it; its base URL once /v1/health answers."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", str(run), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if get_json(f"{url}/v1/health")["status"] == "ok":
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"nmt serve did not come up:\n{proc.stdout.read()}")
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(30)


@pytest.fixture(scope="module")
def server(tiny_transformer_run: Path) -> Iterator[str]:
    yield from serving(tiny_transformer_run)


@pytest.fixture(scope="module")
def multilingual_server(multilingual_runs: dict[str, Path]) -> Iterator[str]:
    yield from serving(multilingual_runs["source"])


@pytest.fixture(scope="module")
def browser():
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def nmt_translate(run: Path, text: str, *options: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", str(run), *options],
        input=text + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    return out.stdout.rstrip("\n")


def plain(pieces: list[str]) -> list[str]:
    """Pieces as the page and the PNG maps label them: without the word-boundary marker."""
    return [p.replace("\u2581", "") for p in pieces]


def translate_on_page(page, url: str, sentence: str) -> None:
    page.goto(url + "/")
    page.wait_for_function("document.querySelector('#beam').options.length > 0")
    page.fill("#source", sentence)
    page.click("#translate")
    page.wait_for_selector("#translations li .text")
    page.wait_for_selector("#heatmap tbody tr")


@needs_browser
def test_page_shows_nmt_translates_text_and_a_heatmap_row_per_target_piece(
    server, browser, tiny_transformer_run
):
    sentence = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()[0]
    page = browser.new_page()
    translate_on_page(page, server, sentence)
    shown = page.inner_text("#translations li .text")
    assert shown == nmt_translate(tiny_transformer_run, sentence)

    (t,) = get_json(f"{server}/v1/translate", {"text": [sentence], "alignment": True})[
        "translations"
    ]
    rows = page.locator("#heatmap tbody tr")
    assert rows.count() == len(t["tgt_pieces"])
    assert page.locator("#heatmap tbody th").all_inner_texts() == plain(t["tgt_pieces"])
    assert page.locator("#heatmap thead th").count() == len(t["src_pieces"]) + 1

    page.hover("#heatmap tbody tr:nth-child(1) td:nth-of-type(1)")
    assert "←" in page.inner_text("#cell-info")

    first_row = page.locator("#heatmap tbody tr:nth-child(1) td").evaluate_all(
        "cells => cells.map(c => c.dataset.weight)"
    )
    page.select_option("#head", "0")  # another head: same rows, other weights
    page.wait_for_function(
        f"JSON.stringify([...document.querySelectorAll("
        f"'#heatmap tbody tr:nth-child(1) td')].map(c => c.dataset.weight))"
        f" !== {json.dumps(json.dumps(first_row))}"
    )
    assert rows.count() == len(t["tgt_pieces"])
    page.close()


@needs_browser
def test_page_reads_on_a_phone_width_screen(server, browser, tiny_transformer_run):
    sentence = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()[1]
    page = browser.new_page(viewport={"width": 375, "height": 740})
    translate_on_page(page, server, sentence)
    # Nothing wider than the screen but the heatmap, which scrolls inside its own box.
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.locator("#translate").is_visible()
    page.close()


@needs_browser
def test_page_offers_the_runs_own_example_and_labels_the_heatmap_with_plain_words(
    server, browser, tiny_transformer_run
):
    example = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()[0]
    page = browser.new_page()
    translate_on_page(page, server, example)
    assert page.get_attribute("#source", "placeholder") == example  # not German for a toy model
    (t,) = get_json(f"{server}/v1/translate", {"text": [example], "alignment": True})[
        "translations"
    ]
    assert any("\u2581" in p for p in t["src_pieces"])  # the API keeps the pieces as they are
    columns = page.locator("#heatmap thead th").all_inner_texts()[1:]
    assert columns == plain(t["src_pieces"])
    # The label row is as tall as its longest label and no taller: no blank band above them.
    slack = page.evaluate(
        """() => [...document.querySelectorAll('#heatmap thead th')].slice(1).map(th => {
             const r = document.createRange(); r.selectNodeContents(th);
             return th.getBoundingClientRect().height - r.getBoundingClientRect().height; })"""
    )
    assert columns and min(slack) < 16, slack
    page.close()


@needs_browser
def test_page_puts_the_phrases_typed_in_its_box_in_the_translation(
    server, browser, tiny_transformer_run, tmp_path
):
    """A phrase typed in the box (one the untrained-enough model would not have written) is in
    the translation shown, which is `nmt translate --constraints`'s for the same phrase."""
    corpus = tiny_transformer_run.parent / "corpus"
    sentence = (corpus / "test.src").read_text().splitlines()[0]
    before = nmt_translate(tiny_transformer_run, sentence)
    words = (corpus / "train.tgt").read_text().split()
    phrase = next(w for w in words if f" {w} " not in f" {before} ")
    cons = tmp_path / "cons.tsv"
    cons.write_text(phrase + "\n")
    want = nmt_translate(tiny_transformer_run, sentence, "--constraints", str(cons))

    page = browser.new_page()
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('#beam').options.length > 0")
    page.fill("#source", sentence)
    page.fill("#constraints", f" {phrase} , ")  # spaces and an empty item are dropped
    page.click("#translate")
    page.wait_for_selector("#translations li .text")
    shown = page.inner_text("#translations li .text")
    assert f" {phrase} " in f" {shown} " and shown == want
    page.close()


@needs_browser
def test_page_translates_into_the_language_chosen_directly_or_through_a_pivot(
    multilingual_server, browser, multilingual_runs, three_way_corpus
):
    """A multilingual model's page has the target-language and pivot menus; what it shows is
    `nmt translate --tgt-lang` (and `--pivot`)'s for the same sentence."""
    run = multilingual_runs["source"]
    sentence = (three_way_corpus / "test.a").read_text().splitlines()[0]
    page = browser.new_page()
    page.goto(multilingual_server + "/")
    page.wait_for_function("document.querySelector('#pivot').options.length > 0")
    assert (
        page.locator("#tgt-lang-label").is_visible() and page.locator("#pivot-label").is_visible()
    )
    assert page.locator("#pivot option").all_inner_texts() == ["direct", "a", "b", "c"]
    page.fill("#source", sentence)
    for pivot in ("", "b"):
        page.select_option("#tgt-lang", "c")
        page.select_option("#pivot", pivot)
        page.click("#translate")
        page.wait_for_function("!document.querySelector('#translate').disabled")
        shown = page.inner_text("#translations li .text")
        via = ["--pivot", pivot] if pivot else []
        assert shown == nmt_translate(run, sentence, "--tgt-lang", "c", "--src-lang", "a", *via)
        # through a pivot there is no attention over the input to draw
        assert page.locator("#attention").is_hidden() == bool(pivot)
    page.close()
