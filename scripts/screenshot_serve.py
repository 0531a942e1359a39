"""Screenshot of the `nmt serve` page (docs/serve_page.png) in headless Debian chromium.

    python scripts/screenshot_serve.py RUN "Ein Hund rennt über die Wiese." --out docs/serve_page.png

Starts `nmt serve RUN` on a free port, types the sentences, clicks Translate and saves the page
with the first sentence's attention heatmap.
"""

from __future__ import annotations

import argparse
import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("sentences", nargs="+")
    ap.add_argument("--out", default="docs/serve_page.png")
    ap.add_argument("--width", type=int, default=900)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", a.run, "--port", str(port)], cwd=ROOT
    )
    try:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/v1/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": a.width, "height": 700})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("document.querySelector('#beam').options.length > 0")
            page.fill("#source", "\n".join(a.sentences))
            page.click("#translate")
            page.wait_for_selector("#heatmap tbody tr", timeout=120_000)
            page.hover("#heatmap tbody tr:nth-child(2) td:nth-of-type(2)")
            page.screenshot(path=a.out, full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
    print(a.out)


if __name__ == "__main__":
    main()
