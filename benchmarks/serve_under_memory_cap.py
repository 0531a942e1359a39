"""`nmt serve` at its default settings under a 4 GB address-space cap (`ulimit -v 4000000`),
with lexical constraints within its limits and far over them, from concurrent clients.

    python benchmarks/serve_under_memory_cap.py --run RUN --requests 200 --clients 16 \
        --over 10 --out benchmarks/serve-under-memory-cap-2core.json

RUN is a run directory; without --run a tiny Transformer is trained first (a few seconds, as
tests/conftest.py's tiny_transformer_run). The requests take 1-3 sentences of RUN's test split
each, with 0-3 phrases of 1-2 words drawn from their references (and now and then a word of
the reference to exclude); `--over` of them are far over a limit (5,000 two-word phrases in one
sentence, 1,000 copies of one phrase, 40 phrases, a 30-word phrase, a body over 256 KB). The
server runs in a process whose address space is capped (RLIMIT_AS, what `ulimit -v` sets).
Passed when no answer is a 5xx, every over-limit request is a 4xx, and every other answer's
text equals what `nmt translate --constraints` writes for the same sentences and phrases. The
JSON records the statuses, the mismatches, and the server's peak virtual and resident memory.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402

CAP_KB = 4_000_000  # ulimit -v's unit: KiB


def tiny_run(root: Path) -> Path:
    """The tiny Transformer of tests/conftest.py (tiny_transformer_run), trained in `root`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import train_tiny_transformer

    return train_tiny_transformer(root)


def test_pairs(run: Path) -> tuple[list[str], list[str]]:
    """RUN's test split (its sources and references)."""
    from nmt.data.corpus import load_split
    from nmt.run_dir import RunDir

    srcs, refs = load_split(RunDir(run).saved_config().data, "test")
    keep = [(s, r) for s, r in zip(srcs, refs) if s.strip() and r.strip()]
    return [s for s, _ in keep], [r for _, r in keep]


def within_limits(srcs: list[str], refs: list[str], rng: random.Random) -> dict:
    """A request of 1-3 sentences with 0-3 phrases each drawn from their references."""
    picked = [rng.randrange(len(srcs)) for _ in range(rng.randint(1, 3))]
    constraints = []
    for i in picked:
        words = refs[i].split()
        include = []
        for _ in range(rng.randint(0, 3)):
            n = rng.randint(1, 2)
            at = rng.randrange(max(1, len(words) - n + 1))
            include.append(" ".join(words[at : at + n]))
        others = [w for w in words if not any(w in p.split() for p in include)]
        if others and rng.random() < 0.3:
            constraints.append({"include": include, "exclude": [rng.choice(others)]})
        else:
            constraints.append(include or None)
    return {"text": [srcs[i] for i in picked], "constraints": constraints}


def over_limits(srcs: list[str], refs: list[str], k: int) -> dict:
    """The k-th request far over a limit: a 4xx, never work."""
    words = " ".join(refs).split()
    pairs = [f"{words[i % len(words)]} {words[(i + 1) % len(words)]}" for i in range(5000)]
    kinds = [
        [pairs],  # 5,000 two-word phrases in one sentence (66 KB: under the body limit)
        [[words[0]] * 1000],  # 1,000 copies of one phrase
        [pairs[:40]],  # 40 phrases in one sentence
        [[" ".join(words[:30])]],  # a 30-word phrase
        [pairs * 6],  # 30,000 phrases: a body over 256 KB
    ]
    constraints = kinds[k % len(kinds)]
    return {"text": srcs[: len(constraints)], "constraints": constraints, "over": True}


def capped_server(run: Path, port_file: Path, cap_kb: int) -> subprocess.Popen:
    """`nmt serve RUN --port 0` at its default settings, its address space capped."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap_kb * 1024, cap_kb * 1024))

    log = open(port_file, "w")
    return subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", str(run), "--port", "0"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=cap,
    )


def wait_for_port(server: subprocess.Popen, log: Path, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"on http://127\.0\.0\.1:(\d+)/", log.read_text())
        if m:
            return int(m.group(1))
        if server.poll() is not None:
            raise SystemExit(f"nmt serve exited under the cap:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise SystemExit(f"nmt serve did not start in {timeout:g} s:\n{log.read_text()[-3000:]}")


def send_all(port: int, requests: list[dict], n_clients: int) -> list[tuple[int, dict]]:
    """Every request from n_clients threads (one connection each): (status, JSON) in order."""
    answers: list = [None] * len(requests)
    todo = iter(range(len(requests)))
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            body = {k: v for k, v in requests[i].items() if k != "over"}
            try:
                conn.request("POST", "/v1/translate", json.dumps(body), _JSON)
                r = conn.getresponse()
                answers[i] = (r.status, json.loads(r.read() or b"{}"))
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            except (OSError, http.client.HTTPException, ValueError) as e:
                answers[i] = (0, {"error": f"{type(e).__name__}: {e}"})
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    threads = [threading.Thread(target=client) for _ in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


_JSON = {"Content-Type": "application/json"}


def reference(run: Path, requests: list[dict], work: Path) -> list[str]:
    """`nmt translate --constraints` of every sentence of the within-limit requests, in order."""
    texts, rows = [], []
    for req in requests:
        if req.get("over"):
            continue
        for text, c in zip(req["text"], req["constraints"]):
            texts.append(text)
            rows.append("" if not c else json.dumps(c if isinstance(c, dict) else {"include": c}))
    (work / "src.txt").write_text("".join(t + "\n" for t in texts), "utf-8")
    (work / "cons.tsv").write_text("".join(r + "\n" for r in rows), "utf-8")
    cmd = [sys.executable, "-m", "nmt", "translate", str(run), "-i", str(work / "src.txt")]
    cmd += ["--constraints", str(work / "cons.tsv"), "-o", str(work / "out.txt")]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return (work / "out.txt").read_text("utf-8").split("\n")[:-1]


def memory(pid: int) -> dict:
    """The process's peak virtual (VmPeak) and resident (VmHWM) memory, in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    out = {}
    for key in ("VmPeak", "VmHWM"):
        m = re.search(rf"^{key}:\s+(\d+) kB", status, re.M)
        out[key] = round(int(m.group(1)) / 1024, 1) if m else None
    return out


def check(
    run: Path, n_requests: int, n_clients: int, n_over: int, cap_kb: int = CAP_KB, seed: int = 1
) -> dict:
    """The whole check (see the module's docstring): its record, `passed` among it."""
    srcs, refs = test_pairs(run)
    rng = random.Random(seed)
    requests = [within_limits(srcs, refs, rng) for _ in range(n_requests - n_over)]
    for k in range(n_over):  # spread through the stream
        requests.insert(rng.randrange(len(requests) + 1), over_limits(srcs, refs, k))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = capped_server(run, work / "serve.log", cap_kb)
        try:
            port = wait_for_port(server, work / "serve.log")
            start = time.perf_counter()
            answers = send_all(port, requests, n_clients)
            seconds = time.perf_counter() - start
            mem = memory(server.pid)
            alive = server.poll() is None
        finally:
            server.terminate()
            server.wait(30)
        expected = iter(reference(run, requests, work))
    return _record(requests, answers, expected, seconds, mem, alive, cap_kb, n_clients)


def _record(requests, answers, expected, seconds, mem, alive, cap_kb, n_clients) -> dict:
    statuses: dict[str, int] = {}
    over_statuses, mismatches, server_errors = [], [], []
    for i, (req, (status, body)) in enumerate(zip(requests, answers)):
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status >= 500 or status == 0:
            server_errors.append({"request": i, "status": status, "body": body})
        if req.get("over"):
            over_statuses.append({"status": status, "limit": body.get("limit")})
            continue
        got = [t["text"] for t in body.get("translations", [])] if status == 200 else []
        want = [next(expected) for _ in req["text"]]
        if got != want:
            mismatches.append({"request": i, "status": status, "got": got, "want": want})
    over_ok = all(400 <= o["status"] < 500 for o in over_statuses)
    passed = alive and not server_errors and over_ok and not mismatches
    return {
        "passed": passed,
        "requests": len(requests),
        "over_limit": len(over_statuses),
        "clients": n_clients,
        "address_space_cap_kb": cap_kb,
        "server_alive_after": alive,
        "statuses": statuses,
        "over_limit_answers": over_statuses,
        "server_errors": server_errors[:10],
        "mismatches": mismatches[:10],
        "n_mismatches": len(mismatches),
        "server_memory_mb": mem,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", help="run directory (default: train a tiny Transformer first)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--over", type=int, default=10, help="requests far over a limit")
    ap.add_argument("--cap-kb", type=int, default=CAP_KB, help="address-space cap (ulimit -v)")
    ap.add_argument("--out", default="benchmarks/serve-under-memory-cap.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(a.run) if a.run else tiny_run(Path(tmp))
        record = check(run, a.requests, a.clients, a.over, a.cap_kb)
        record["run"] = str(a.run or "tiny Transformer (tests/conftest.py), trained here")
    record["machine"] = machine()
    record["command"] = " ".join(["python", *sys.argv])
    print(write_json(a.out, record))
    if not record["passed"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
