"""Data at scale: memory and speed of the prepared, memory-mapped corpus (JSON out).

On local text written by `nmt data synth --train 2000000 --lexicon 2000`, with the toy transformer
and an 8k unigram vocabulary (the settings of issue 14), it measures, each command in its own
process tree, sampled for the summed RSS (and PSS) of the processes that do the work:
  - the current code's `nmt train --dry-run` (from --baseline, e.g. main's worktree) and this
    tree's `nmt prepare` on the first --small pairs, side by side: pairs/s and their ratio;
  - `nmt prepare` of the whole corpus: peak RSS and pairs/s;
  - one optimiser step (`nmt train --set train.max_steps=1`) on the prepared whole corpus and on
    its first 100k pairs: wall time from the command's start, peak RSS and the difference;
  - the same step under a 2-process `torchrun` (gloo): both ranks' RSS together against one rank.
The machine is shared: only ratios taken in the same run compare, and CPU seconds (the command
and its reaped workers) say more than wall time under load. lscpu and load are recorded.

    python scripts/benchmark_data.py --corpus /tmp/c2m --baseline /work/main --out bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")
SETTINGS = [
    "data.source=local",
    "vocab.type=unigram",
    "vocab.size=8000",
    "train.threads=1",
    "train.valid_every=1000000",
    "data.splits={train: train}",
    "train.max_minutes=0",
]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _tree(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes of one process (0 when it is gone)."""
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        pss = 0
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
        return rss, pss
    except (OSError, ValueError, IndexError):
        return 0, 0


def _is_worker(pid: int, skip: tuple[str, ...]) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return "python" in cmd and not any(s in cmd for s in skip)


def measure(
    cmd: list[str],
    cwd: Path,
    skip: tuple[str, ...] = (),
    env: dict | None = None,
    log: Path | None = None,
) -> dict:
    """Run `cmd`; peak summed RSS/PSS of its python processes (minus `skip` ones) and wall time."""
    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    peak_rss = peak_pss = 0
    per_proc_peak: dict[int, int] = {}
    while proc.poll() is None:
        rss = pss = 0
        for p in _tree(proc.pid):
            if _is_worker(p, skip):
                r, s = _memory(p)
                rss, pss = rss + r, pss + s
                per_proc_peak[p] = max(per_proc_peak.get(p, 0), r)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.1)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its reaped workers
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}; see {log}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(peak_rss / 2**20, 1),
        "peak_pss_mb": round(peak_pss / 2**20, 1),
        "largest_process_rss_mb": round(max(per_proc_peak.values(), default=0) / 2**20, 1),
        "command": " ".join(cmd),
    }


def subset(corpus: Path, out: Path, n: int) -> Path:
    """The first n training pairs (`nmt data synth` output is a prefix of any longer request)."""
    if not (out / "train.tgt").is_file():
        out.mkdir(parents=True, exist_ok=True)
        for side in ("src", "tgt"):
            with open(corpus / f"train.{side}", "rb") as f, open(out / f"train.{side}", "wb") as g:
                for i, line in enumerate(f):
                    if i >= n:
                        break
                    g.write(line)
    return out


def nmt_cmd(python: str, sub: list[str], data: Path, extra: list[str]) -> list[str]:
    sets = [x for s in SETTINGS + [f"data.path={data}"] + extra for x in ("--set", s)]
    return [python, "-m", "nmt", *sub, "configs/toy/transformer.yaml", *sets]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    return {
        "cpu": info.get("Model name", "").strip(),
        "cpus": info.get("CPU(s)", "").strip(),
        "flags_avx2": "avx2" in info.get("Flags", ""),
        "flags_avx512f": "avx512f" in info.get("Flags", ""),
        "load": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path, help="nmt data synth output (2M pairs)")
    ap.add_argument("--baseline", type=Path, help="worktree of the current code (old path)")
    ap.add_argument("--small", type=int, default=400000, help="pairs for the side-by-side ratio")
    ap.add_argument("--workers", type=int, default=2, help="data.workers for nmt prepare")
    ap.add_argument("--work", type=Path, default=Path("/tmp/nmt_benchmark_data"))
    ap.add_argument("--out", type=Path, default=Path("benchmark_data.json"))
    ap.add_argument("--skip", default="", help="comma-separated stages to skip")
    a = ap.parse_args()
    py, work = sys.executable, a.work
    work.mkdir(parents=True, exist_ok=True)
    prep = work / "prepared"
    small, tiny = (
        subset(a.corpus, work / "small", a.small),
        subset(a.corpus, work / "c100k", 100000),
    )
    n_all = sum(1 for _ in open(a.corpus / "train.src", "rb"))
    res: dict = {
        "machine_before": machine(),
        "pairs": {"all": n_all, "small": a.small, "tiny": 100000},
        "workers": a.workers,
        "settings": SETTINGS,
    }
    skip = set(a.skip.split(","))

    def save() -> None:
        res["machine_after"] = machine()
        a.out.write_text(json.dumps(res, indent=1) + "\n")

    def stage(name: str, cmd: list[str], cwd: Path = REPO, **kw) -> dict:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(cmd[-4:])}", flush=True)
        res[name] = measure(cmd, cwd, log=work / f"{name}.log", **kw)
        res[name]["load_after"] = os.getloadavg()
        print(f"    {res[name]}", flush=True)
        save()
        return res[name]

    own = [f"data.prepared_dir={prep}", f"data.workers={a.workers}"]
    if "ratio" not in skip:
        shutil.rmtree(prep, ignore_errors=True)
        if a.baseline and "old" not in skip:
            base_py = str(a.baseline / ".venv" / "bin" / "python")
            old = stage(
                "old_dry_run_small",
                nmt_cmd(base_py, ["train"], small, []) + ["--dry-run"],
                cwd=a.baseline,
                env={"PYTHONPATH": str(a.baseline)},
            )
        new = stage("new_prepare_small", nmt_cmd(py, ["prepare"], small, own))
        if a.baseline and "old" not in skip:
            res["ratio_pairs_per_s"] = round(old["wall_s"] / new["wall_s"], 2)
            res["ratio_cpu_s"] = round(old["cpu_s"] / new["cpu_s"], 2)
        save()
    if "all" not in skip:
        stage("new_prepare_all", nmt_cmd(py, ["prepare"], a.corpus, own))
        stage("new_prepare_tiny", nmt_cmd(py, ["prepare"], tiny, own))
        res["pairs_per_s_all"] = round(n_all / res["new_prepare_all"]["wall_s"])
    step = own + ["train.max_steps=1", "train.progress=false"]
    for name, data in (("first_step_all", a.corpus), ("first_step_tiny", tiny)):
        run = work / f"run_{name}"
        stage(name, nmt_cmd(py, ["train"], data, step + [f"train.run_dir={run}"]) + ["--overwrite"])
    res["rss_all_minus_tiny_mb"] = round(
        res["first_step_all"]["peak_rss_mb"] - res["first_step_tiny"]["peak_rss_mb"], 1
    )
    if "torchrun" not in skip:
        run = work / "run_ddp"
        cmd = nmt_cmd(py, ["train"], a.corpus, step + [f"train.run_dir={run}"]) + ["--overwrite"]
        ddp = [
            py,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            *cmd[1:],
        ]
        stage("torchrun_2_ranks", ddp, skip=("torch.distributed.run",))
        res["ddp_rss_minus_one_rank_mb"] = round(
            res["torchrun_2_ranks"]["peak_rss_mb"] - res["first_step_all"]["peak_rss_mb"], 1
        )
        res["ddp_pss_minus_one_rank_mb"] = round(
            res["torchrun_2_ranks"]["peak_pss_mb"] - res["first_step_all"]["peak_pss_mb"], 1
        )
    save()
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
