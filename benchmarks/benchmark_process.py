#!/usr/bin/env python
"""`nmt translate` against a CTranslate2 script, as whole processes: what a user waits for.

    python benchmarks/benchmark_process.py RUN --src FILE --n 5000 --beams 1,5 --reps 3 --out F

The run is exported to CTranslate2 (fp32 and int8) in a temporary folder; then, for each beam,
each repetition times, in turns, `nmt translate RUN -i SRC -o OUT --beam K` (and `--int8`) and
`python benchmarks/ct2_client.py EXPORT -i SRC -o OUT --beam K` (fp32 and int8) from process
start to exit: imports, loading the model, reading and writing the files count. Both decode the
first --n lines of SRC with the same per-sentence output limits and --threads threads
(OMP_NUM_THREADS for nmt, intra_threads for CTranslate2). The JSON holds every repetition, the
median of each engine, the ratios, the share of lines identical to the peer and the machine.
In-process decoding speed, without start-up, is `benchmark_export.py`'s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, uptime, write_json  # noqa: E402

CLIENT = ROOT / "benchmarks" / "ct2_client.py"
ENGINES = ["nmt fp32", "ct2 fp32", "nmt int8", "ct2 int8"]
PEER = {
    "nmt fp32": "nmt fp32",
    "ct2 fp32": "nmt fp32",
    "nmt int8": "nmt fp32",
    "ct2 int8": "ct2 fp32",
}
RATIOS = [("nmt fp32", "ct2 fp32"), ("nmt int8", "ct2 int8")]


def command(engine: str, run: str, export: Path, src: Path, out: Path, beam: int, threads: int):
    """The command line of one engine, as a user would type it."""
    kind = engine.split()[1]
    if engine.startswith("nmt"):
        cmd = [sys.executable, "-m", "nmt", "translate", run, "-i", str(src), "-o", str(out)]
        return cmd + ["--beam", str(beam)] + (["--int8"] if kind == "int8" else [])
    return [sys.executable, str(CLIENT), str(export / kind), "-i", str(src), "-o", str(out)] + [
        "--beam",
        str(beam),
        "--threads",
        str(threads),
        "--compute-type",
        {"fp32": "float32", "int8": "int8"}[kind],
    ]


def time_process(cmd: list[str], threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return time.perf_counter() - t


def bench_beam(run: str, export: Path, src: Path, n: int, beam: int, a) -> dict:
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    outs = {e: export / f"out.{e.replace(' ', '_')}.b{beam}.txt" for e in ENGINES}
    for _ in range(a.reps):  # engines take turns: a load change hits them alike
        for e in ENGINES:
            times[e].append(
                time_process(command(e, run, export, src, outs[e], beam, a.threads), a.threads)
            )
            print(f"  beam {beam} {e}: {times[e][-1]:.2f} s", file=sys.stderr, flush=True)
    lines = {e: outs[e].read_text("utf-8").splitlines() for e in ENGINES}
    row = {}
    for e in ENGINES:
        med = statistics.median(times[e])
        same = sum(x == y for x, y in zip(lines[e], lines[PEER[e]])) / n
        row[e] = {
            "median_s": round(med, 3),
            "sent_s": round(n / med, 2),
            "seconds": [round(x, 3) for x in times[e]],
            "identical_to": PEER[e],
            "identical": round(same, 4),
        }
    row["ratios"] = {
        f"{x}/{y}".replace(" ", "_"): round(row[x]["sent_s"] / row[y]["sent_s"], 3)
        for x, y in RATIOS
    }
    return row


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a Transformer run directory")
    ap.add_argument("--src", required=True, help="source text, one sentence a line")
    ap.add_argument("--n", type=int, default=5000, help="first N lines of --src")
    ap.add_argument("--beams", default="1,5")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (the median is reported)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from nmt.export.ctranslate2 import export_ctranslate2, import_ctranslate2

    res = {
        "command": "python " + " ".join([Path(sys.argv[0]).name] + (argv or sys.argv[1:])),
        "machine": {**machine(), "ctranslate2": import_ctranslate2().__version__},
        "uptime_before": uptime(),
        "run": a.run,
        "threads": a.threads,
        "beams": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp)
        lines = Path(a.src).read_text("utf-8").splitlines()[: a.n]
        src = export / "src.txt"
        src.write_text("".join(x + "\n" for x in lines), "utf-8")
        res["sentences"] = len(lines)
        for kind, quant in (("fp32", None), ("int8", "int8")):
            export_ctranslate2(a.run, export / kind, quantization=quant)
        for beam in [int(b) for b in a.beams.split(",")]:
            res["beams"][str(beam)] = bench_beam(a.run, export, src, len(lines), beam, a)
            write_json(a.out, {**res, "uptime_after": uptime()})  # a partial result survives
    res["uptime_after"] = uptime()
    print(write_json(a.out, res))
    return res


if __name__ == "__main__":
    main()
