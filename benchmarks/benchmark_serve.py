"""Throughput and latency of `nmt serve` under concurrent clients, against its peers in one run.

    python benchmarks/benchmark_serve.py --run /work/runs/multi30k-transformer \
        --src ../shared/data/multi30k/test_2016_flickr.de --n 1000 --clients 32 \
        --out benchmarks/benchmark-serve.json

Sends N sentences, one per request, from C concurrent clients (one keep-alive connection each)
over loopback to a real `nmt serve` process, with batching (--max-batch-tokens B) and with it
off (--max-batch-tokens 0), and translates the same file with `nmt translate` (the whole file in
one process; its wall time includes starting Python and loading the model, so the in-process
decode time of the same call is reported beside it). Every answer is checked against the line
`nmt translate` wrote. The machine is shared: compare the modes of one run (ratios), and read
the load recorded before and after each; the CPU seconds each mode used (the server's and the
clients' apart) do not count the other jobs, so their ratio is the steadier one. The server's
/v1/health counters say how many sentences a batch held and why the worker closed each batch. Every mode runs with --threads torch threads
(OMP_NUM_THREADS; default 1: on a shared, oversubscribed machine more threads spin and stall).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import free_port, lscpu, write_json  # noqa: E402
from benchmarks.machine import uptime as load  # noqa: E402


def machine() -> dict:
    return {k: v for k, v in lscpu().items() if k in ("Model name", "CPU(s)", "Flags")}


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def process_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a running process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nmt_translate(run: str, src: Path, out: Path) -> dict:
    start, cpu = time.perf_counter(), children_cpu_s()
    subprocess.run(
        [sys.executable, "-m", "nmt", "translate", run, "-i", str(src), "-o", str(out)],
        cwd=ROOT,
        check=True,
        stderr=subprocess.DEVNULL,
    )
    return {"wall_s": time.perf_counter() - start, "cpu_s": round(children_cpu_s() - cpu, 2)}


def in_process_decode(run: str, lines: list[str]) -> dict:
    """What `nmt translate` spends decoding, without starting Python and loading the model."""
    import torch

    from nmt.api import Translator

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    t = Translator.load(run)
    t.translate(lines[:1])  # warm-up, as the servers get
    start, cpu = time.perf_counter(), time.process_time()
    t.translate(lines)
    return {"wall_s": time.perf_counter() - start, "cpu_s": round(time.process_time() - cpu, 2)}


def start_server(
    run: str, port: int, max_batch_tokens: int, max_wait_ms: float, queue_size: int
) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt",
            "serve",
            run,
            "--port",
            str(port),
            "--max-batch-tokens",
            str(max_batch_tokens),
            "--max-wait-ms",
            str(max_wait_ms),
            "--queue",
            str(queue_size),
            "--timeout",
            "600",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("nmt serve did not start")


def clients(port: int, lines: list[str], n_clients: int) -> dict:
    """n_clients threads, one keep-alive connection each, pulling sentences from one queue."""
    todo: queue.Queue = queue.Queue()
    for i, s in enumerate(lines):
        todo.put((i, s))
    answers: list = [None] * len(lines)
    latency: list = [None] * len(lines)
    status: list = [None] * len(lines)

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            try:
                i, s = todo.get_nowait()
            except queue.Empty:
                return
            body = json.dumps({"text": [s]})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = json.loads(r.read())
            latency[i], status[i] = time.perf_counter() - t0, r.status
            answers[i] = data["translations"][0]["text"] if r.status == 200 else None

    threads = [threading.Thread(target=client) for _ in range(n_clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ms = sorted(x * 1000 for x in latency)
    return {
        "wall_s": wall,
        "answers": answers,
        "status": status,
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
        "max_ms": ms[-1],
    }


def health(port: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/v1/health")
    return json.loads(c.getresponse().read())


def serve_mode(
    run: str,
    lines: list[str],
    refs: list[str],
    n_clients: int,
    max_batch_tokens: int,
    max_wait_ms: float,
) -> dict:
    port = free_port()
    proc = start_server(run, port, max_batch_tokens, max_wait_ms, queue_size=4 * n_clients)
    try:
        clients(port, lines[:1], 1)  # warm-up: a server is long-lived
        before, h0 = load(), health(port)
        cpu_server, cpu_clients = process_cpu_s(proc.pid), time.process_time()
        got = clients(port, lines, n_clients)
        cpu_server = process_cpu_s(proc.pid) - cpu_server
        cpu_clients = time.process_time() - cpu_clients
        h1 = health(port)
    finally:
        proc.terminate()
        proc.wait(60)
    equal = sum(a == r for a, r in zip(got["answers"], refs))
    return {
        "max_batch_tokens": max_batch_tokens,
        "max_wait_ms": max_wait_ms,
        "wall_s": round(got["wall_s"], 2),
        "sentences_per_s": round(len(lines) / got["wall_s"], 2),
        "p50_ms": round(got["p50_ms"], 1),
        "p99_ms": round(got["p99_ms"], 1),
        "max_ms": round(got["max_ms"], 1),
        "cpu_s": {"server": round(cpu_server, 2), "clients": round(cpu_clients, 2)},
        "answered_200": sum(s == 200 for s in got["status"]),
        "equal_to_nmt_translate": equal,
        "different": [
            {"line": i + 1, "serve": a, "translate": r}
            for i, (a, r) in enumerate(zip(got["answers"], refs))
            if a != r
        ][:10],
        "batches": h1["batches"] - h0["batches"],
        "mean_batch_sentences": round(
            (h1["sentences"] - h0["sentences"]) / max(1, h1["batches"] - h0["batches"]), 2
        ),
        "batches_closed_by": {
            k: h1[f"closed_{k}"] - h0[f"closed_{k}"] for k in ("full", "returned", "max_wait")
        },
        "worker_waited_s": round(h1["wait_s"] - h0["wait_s"], 2),
        "load_before": before,
        "load_after": load(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="run directory or checkpoint")
    ap.add_argument("--src", required=True, help="source sentences, one per line")
    ap.add_argument("--n", type=int, default=1000, help="sentences (first N lines)")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--max-batch-tokens", type=int, default=2000)
    ap.add_argument("--max-wait-ms", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every mode")
    ap.add_argument("--out", help="JSON file (default: stdout only)")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)  # inherited by nmt translate / serve

    lines = Path(a.src).read_text("utf-8").splitlines()[: a.n]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"benchmark_serve_{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "src.txt"
    src.write_text("".join(s + "\n" for s in lines), "utf-8")

    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "run": a.run,
        "sentences": len(lines),
        "clients": a.clients,
        "threads": a.threads,
    }
    before = load()
    result["nmt_translate"] = {
        **nmt_translate(a.run, src, work / "ref.txt"),
        "load_before": before,
        "load_after": load(),
    }
    refs = (work / "ref.txt").read_text("utf-8").splitlines()
    result["nmt_translate"]["sentences_per_s"] = round(
        len(lines) / result["nmt_translate"]["wall_s"], 2
    )
    before = load()
    result["in_process_decode"] = {
        **in_process_decode(a.run, lines),
        "load_before": before,
        "load_after": load(),
    }
    result["in_process_decode"]["sentences_per_s"] = round(
        len(lines) / result["in_process_decode"]["wall_s"], 2
    )
    result["serve_batching"] = serve_mode(
        a.run, lines, refs, a.clients, a.max_batch_tokens, a.max_wait_ms
    )
    result["serve_no_batching"] = serve_mode(a.run, lines, refs, a.clients, 0, a.max_wait_ms)
    b, nb = result["serve_batching"], result["serve_no_batching"]
    result["ratios"] = {
        "batching_vs_no_batching": round(b["sentences_per_s"] / nb["sentences_per_s"], 2),
        "batching_vs_nmt_translate": round(
            b["sentences_per_s"] / result["nmt_translate"]["sentences_per_s"], 2
        ),
        "batching_vs_in_process_decode": round(
            b["sentences_per_s"] / result["in_process_decode"]["sentences_per_s"], 2
        ),
        # sentences per CPU-second (the machine is shared: CPU time does not count the others)
        "batching_vs_nmt_translate_per_cpu_s": round(
            result["nmt_translate"]["cpu_s"] / b["cpu_s"]["server"], 2
        ),
        "batching_with_clients_vs_nmt_translate_per_cpu_s": round(
            result["nmt_translate"]["cpu_s"] / (b["cpu_s"]["server"] + b["cpu_s"]["clients"]), 2
        ),
    }
    print(write_json(a.out, result) if a.out else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
