"""Data at scale: memory and speed of the prepared, memory-mapped corpus (JSON out).

On local text written by `nmt data synth --train 2000000 --lexicon 2000`, with the toy transformer
and an 8k unigram vocabulary (the settings of issue 14), it measures, each command in its own
process tree, sampled for the summed RSS (and PSS) of the processes that do the work:
  - the current code's `nmt train --dry-run` (from --baseline, e.g. main's worktree) and this
    tree's `nmt prepare` on the first --small pairs, side by side: pairs/s and their ratio;
  - the same 400k-pair prepare with the old default subword sample (vocab.max_sentences=1M),
    for the peak of sentencepiece training before and after the default changed;
  - `nmt prepare` of the whole corpus (and of its first 100k pairs): peak RSS and pairs/s;
  - one optimiser step (`nmt train --set train.max_steps=1`) on the prepared whole corpus and on
    its first 100k pairs: the time of the trainer's "step 1" log line from the command's start,
    peak RSS and the difference;
  - the same step under a 2-process `torchrun` (gloo), on both corpora: both ranks' RSS, PSS and
    USS (private pages) together against one rank's.
The machine is shared: only ratios taken in the same run compare, and CPU seconds (the command
and its reaped workers) say more than wall time under load. lscpu and load are recorded.

    python benchmarks/benchmark_data.py --corpus /tmp/c2m --baseline /work/old --out bench.json \
        --lock /work/exp/cpu.lock

--baseline is a worktree of the old code (the commit before the prepared corpus); it runs with
--baseline-python (default: its own .venv, else this interpreter) and PYTHONPATH set to it, this
tree's stages with PYTHONPATH set to this tree: the JSON records which `nmt` each side imported.
With --lock every stage holds an exclusive flock on that file, so timed runs of several people
never overlap, and others' short runs can go between stages. Stages can be run separately
(--only / --skip); results are merged into an existing --out.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_flags, cpu_model, free_port, lscpu, write_json  # noqa: E402

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


def _memory(pid: int) -> tuple[int, int, int, int]:
    """(RSS, PSS, USS, anonymous PSS) in bytes of one process (0 when it is gone). USS (private
    pages) is what the process adds to the machine; PSS shares each shared page among the
    processes mapping it; anonymous PSS leaves out file pages (mapped Arrow files, libraries),
    which are page cache the kernel can drop."""
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        pss = uss = anon = 0
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
            elif line.startswith("Pss_Anon:"):
                anon = int(line.split()[1]) * 1024
            elif line.startswith(("Private_Clean:", "Private_Dirty:")):
                uss += int(line.split()[1]) * 1024
        return rss, pss, uss, anon
    except (OSError, ValueError, IndexError):
        return 0, 0, 0, 0


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
    mark: str | None = None,
) -> dict:
    """Run `cmd`; peak summed RSS/PSS of its python processes (minus `skip` ones) and wall time;
    with `mark`, the wall time when that regex first appears in the log (and the peaks until then)."""
    start = time.perf_counter()
    t_mark = None
    mark_rss = mark_pss = 0
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    peak_rss = peak_pss = peak_uss = peak_anon = 0
    per_proc_peak: dict[int, int] = {}
    while proc.poll() is None:
        rss = pss = uss = anon = 0
        for p in _tree(proc.pid):
            if _is_worker(p, skip):
                r, s, u, an = _memory(p)
                rss, pss, uss, anon = rss + r, pss + s, uss + u, anon + an
                per_proc_peak[p] = max(per_proc_peak.get(p, 0), r)
        peak_rss, peak_pss, peak_uss = max(peak_rss, rss), max(peak_pss, pss), max(peak_uss, uss)
        peak_anon = max(peak_anon, anon)
        if (
            mark
            and t_mark is None
            and log
            and re.search(mark, log.read_text(errors="replace"), re.MULTILINE)
        ):
            t_mark, mark_rss, mark_pss = time.perf_counter() - start, peak_rss, peak_pss
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
        "peak_uss_mb": round(peak_uss / 2**20, 1),
        "peak_anon_pss_mb": round(peak_anon / 2**20, 1),
        "largest_process_rss_mb": round(max(per_proc_peak.values(), default=0) / 2**20, 1),
        "processes": len(per_proc_peak),
        **(
            {
                "mark": mark,
                "mark_s": None if t_mark is None else round(t_mark, 2),
                "peak_rss_mb_to_mark": round(mark_rss / 2**20, 1),
                "peak_pss_mb_to_mark": round(mark_pss / 2**20, 1),
            }
            if mark
            else {}
        ),
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


def which_nmt(python: str, cwd: Path, env: dict) -> str:
    """The `nmt` package this interpreter imports with this cwd and environment."""
    return subprocess.run(
        [python, "-c", "import nmt; print(nmt.__file__)"],
        cwd=cwd,
        check=True,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()


@contextmanager
def locked(path: Path | None):
    """Hold an exclusive flock on `path` (none when it is None) while a stage runs."""
    if path is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cpus": lscpu().get("CPU(s)", ""),
        "flags_avx2": "avx2" in cpu_flags(),
        "flags_avx512f": "avx512f" in cpu_flags(),
        "load": os.getloadavg(),
    }


STAGES = (
    "old_dry_run_small",
    "new_prepare_small",
    "new_prepare_small_max1m",
    "new_prepare_all",
    "new_prepare_tiny",
    "first_step_all",
    "first_step_tiny",
    "torchrun_2_ranks",
    "torchrun_2_ranks_tiny",
    "floor_one_process",
    "floor_2_ranks",
)
GROUPS = {
    "ratio": ("old_dry_run_small", "new_prepare_small"),
    "old": ("old_dry_run_small",),
    "before": ("new_prepare_small_max1m",),
    "all": ("new_prepare_all", "new_prepare_tiny"),
    "first": ("first_step_all", "first_step_tiny"),
    "torchrun": ("torchrun_2_ranks", "torchrun_2_ranks_tiny"),
    "floor": ("floor_one_process", "floor_2_ranks"),
}
FIRST_STEP = r"^.*step 1: loss"  # the trainer's log line after its first optimiser step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path, help="nmt data synth output (2M pairs)")
    ap.add_argument("--baseline", type=Path, help="worktree of the old code (the in-memory path)")
    ap.add_argument(
        "--baseline-python", help="interpreter for --baseline (default: its .venv, else this one)"
    )
    ap.add_argument("--small", type=int, default=400000, help="pairs for the side-by-side ratio")
    ap.add_argument("--workers", type=int, default=2, help="data.workers for nmt prepare")
    ap.add_argument("--work", type=Path, default=Path("/tmp/nmt_benchmark_data"))
    ap.add_argument("--out", type=Path, default=Path("benchmark_data.json"))
    ap.add_argument("--lock", type=Path, help="flock this file during each stage")
    ap.add_argument(
        "--skip", default="", help=f"comma-separated stages or groups to skip ({', '.join(GROUPS)})"
    )
    ap.add_argument("--only", default="", help="comma-separated stages or groups to run")
    ap.add_argument(
        "--reps", type=int, default=3, help="runs of each first-step stage (medians reported)"
    )
    a = ap.parse_args()
    py, work = sys.executable, a.work.resolve()
    corpus = a.corpus.resolve()
    work.mkdir(parents=True, exist_ok=True)
    prep = work / "prepared"

    def names(arg: str) -> set[str]:
        return {n for x in arg.split(",") if x for n in GROUPS.get(x, (x,))}

    run_set = (names(a.only) or set(STAGES)) - names(a.skip)
    if not a.baseline:
        run_set.discard("old_dry_run_small")
    unknown = run_set - set(STAGES)
    if unknown:
        raise SystemExit(f"unknown stages: {sorted(unknown)}")
    with locked(a.lock):
        small = subset(corpus, work / "small", a.small)
        tiny = subset(corpus, work / "c100k", 100000)
    with open(corpus / "train.src", "rb") as f:
        n_all = sum(1 for _ in f)
    res: dict = json.loads(a.out.read_text()) if a.out.is_file() else {}
    res.update(
        {
            "pairs": {"all": n_all, "small": a.small, "tiny": 100000},
            "workers": a.workers,
            "settings": SETTINGS,
        }
    )
    res.setdefault("machine_before", machine())
    new_env = {"PYTHONPATH": str(REPO)}
    res["nmt_under_test"] = which_nmt(py, REPO, new_env)
    if a.baseline:
        base = a.baseline.resolve()
        venv = base / ".venv" / "bin" / "python"
        base_py = a.baseline_python or (str(venv) if venv.is_file() else py)
        base_env = {"PYTHONPATH": str(base)}
        res["nmt_baseline"] = which_nmt(base_py, base, base_env)
        res["baseline_commit"] = commit(base)
    res["commit_under_test"] = commit(REPO)

    def save() -> None:
        res["machine_after"] = machine()
        write_json(a.out, res, indent=1)

    def stage(
        name: str, cmd: list[str], cwd: Path = REPO, env: dict | None = None, reps: int = 1, **kw
    ) -> None:
        """Measure `cmd` `reps` times; with more than one, the peaks are medians (`runs` keeps
        each): a first step's peak depends on which batch comes first and on the moment the
        0.1 s sampler catches, and moved single runs by 70 MB."""
        if name not in run_set:
            return
        runs = []
        for _ in range(reps):
            with locked(a.lock):
                load = os.getloadavg()
                print(
                    f"[{time.strftime('%H:%M:%S')}] {name} (load {load[0]:.1f}): "
                    f"{' '.join(cmd[-4:])}",
                    flush=True,
                )
                got = measure(cmd, cwd, log=work / f"{name}.log", env=env or new_env, **kw)
                got["load_before"], got["load_after"] = load, os.getloadavg()
            print(f"    {got}", flush=True)
            runs.append(got)
        res[name] = dict(runs[0])
        if reps > 1:
            for k, v in runs[0].items():
                if k.startswith(("peak_", "wall_s", "cpu_s", "mark_s")) and v is not None:
                    res[name][k] = round(statistics.median(r[k] for r in runs), 2)
            res[name]["runs"] = runs
        save()

    def own(name: str, fresh: bool) -> list[str]:
        """This tree's settings; each prepare stage has its own (emptied) prepared_dir."""
        d = prep / name
        if fresh and name in run_set:
            shutil.rmtree(d, ignore_errors=True)
        return [f"data.prepared_dir={d}", f"data.workers={a.workers}"]

    if a.baseline:
        stage(
            "old_dry_run_small",
            nmt_cmd(base_py, ["train"], small, []) + ["--dry-run"],
            cwd=base,
            env=base_env,
        )
    stage("new_prepare_small", nmt_cmd(py, ["prepare"], small, own("new_prepare_small", True)))
    stage(
        "new_prepare_small_max1m",
        nmt_cmd(
            py,
            ["prepare"],
            small,
            own("new_prepare_small_max1m", True) + ["vocab.max_sentences=1000000"],
        ),
    )
    stage("new_prepare_all", nmt_cmd(py, ["prepare"], corpus, own("new_prepare_all", True)))
    stage("new_prepare_tiny", nmt_cmd(py, ["prepare"], tiny, own("new_prepare_tiny", True)))
    for k, n in (
        ("old_dry_run_small", a.small),
        ("new_prepare_small", a.small),
        ("new_prepare_small_max1m", a.small),
        ("new_prepare_all", n_all),
        ("new_prepare_tiny", 100000),
    ):
        if k in res and k in run_set:
            res[k]["pairs_per_s"] = round(n / res[k]["wall_s"])
            res[k]["pairs_per_cpu_s"] = round(n / res[k]["cpu_s"])
    if "old_dry_run_small" in res and "new_prepare_small" in res:
        res["ratio_pairs_per_s"] = round(
            res["old_dry_run_small"]["wall_s"] / res["new_prepare_small"]["wall_s"], 2
        )
        res["ratio_cpu_s"] = round(
            res["old_dry_run_small"]["cpu_s"] / res["new_prepare_small"]["cpu_s"], 2
        )
    save()

    step = ["train.max_steps=1", "train.progress=false", "train.log_every=1"]
    for name, data, prepared_by in (
        ("first_step_all", corpus, "new_prepare_all"),
        ("first_step_tiny", tiny, "new_prepare_tiny"),
    ):
        if name in run_set and not list((prep / prepared_by).glob("*/meta.json")):
            raise SystemExit(
                f"{name}: run stage {prepared_by} first (it must find the corpus "
                f"prepared, to time training alone)"
            )
        run = work / f"run_{name}"
        stage(
            name,
            nmt_cmd(py, ["train"], data, own(prepared_by, False) + step + [f"train.run_dir={run}"])
            + ["--overwrite"],
            mark=FIRST_STEP,
            reps=a.reps,
        )
    if "first_step_all" in res and "first_step_tiny" in res:
        res["rss_all_minus_tiny_mb"] = round(
            res["first_step_all"]["peak_rss_mb"] - res["first_step_tiny"]["peak_rss_mb"], 1
        )
    for name, data, prepared_by, one in (
        ("torchrun_2_ranks", corpus, "new_prepare_all", "first_step_all"),
        ("torchrun_2_ranks_tiny", tiny, "new_prepare_tiny", "first_step_tiny"),
    ):
        run = work / f"run_{name}"
        cmd = nmt_cmd(
            py, ["train"], data, own(prepared_by, False) + step + [f"train.run_dir={run}"]
        ) + ["--overwrite"]
        ddp = [
            py,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            *cmd[1:],
        ]
        stage(name, ddp, skip=("torch.distributed.run",), mark=FIRST_STEP, reps=a.reps)
        if name in res and one in res:
            for m in ("rss", "pss", "uss", "anon_pss"):
                res[f"{name}_{m}_minus_one_rank_mb"] = round(
                    res[name][f"peak_{m}_mb"] - res[one][f"peak_{m}_mb"], 1
                )
    # The floor: what any torch trainer's second rank costs (benchmarks/ddp_floor.py: no corpus).
    floor = [str(REPO / "benchmarks" / "ddp_floor.py")]
    stage("floor_one_process", [py, *floor], mark=FIRST_STEP, reps=a.reps)
    ddp = [py, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}"]
    stage(
        "floor_2_ranks", ddp + floor, skip=("torch.distributed.run",), mark=FIRST_STEP, reps=a.reps
    )
    if "floor_2_ranks" in res and "floor_one_process" in res:
        for m in ("rss", "pss", "uss", "anon_pss"):
            res[f"floor_2_ranks_{m}_minus_one_process_mb"] = round(
                res["floor_2_ranks"][f"peak_{m}_mb"] - res["floor_one_process"][f"peak_{m}_mb"], 1
            )
    save()
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
