"""Faults: a kill during a checkpoint write, a full disk, running out of memory.

Whatever happens mid-write, the file at a checkpoint's final path is always a whole checkpoint
(older or newer) and leftover temp files are never taken for one; a full disk is one
`nmt: error:` line, exit 2, the previous file intact and no temp file left. Signals and non-finite
losses during training are tested in tests/test_train.py (see docs/reliability.md).
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from conftest import tiny_config, write_yaml
from nmt.checkpoint import load_checkpoint, resolve, step_checkpoints
from nmt.cli import main
from nmt.config.load import load_config
from nmt.errors import NmtError
from nmt.jobs import train as train_job

REPO = Path(__file__).resolve().parents[1]
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

# A one-layer Transformer of 64 dimensions: each checkpoint is larger than anything else in its
# run (a test caps the file size between the two).
CONFIG = {
    "data": {
        "batch_tokens": 300,
        "synthetic": {"train": 200, "valid": 20, "test": 20, "lexicon": 20, "max_words": 8},
    },
    "vocab": {"size": 100},
    "model": {"d_model": 64, "ff": 64, "layers": 1, "dropout": 0.0, "tie_embeddings": True},
    "train": {"max_steps": 2, "device": "cpu"},
}


def tmp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp" in p.name]


def error_line(err: str) -> str:
    lines = err.splitlines()
    assert lines and lines[-1].startswith("nmt: error: "), err
    assert sum(line.startswith("nmt: error: ") for line in lines) == 1 and "Traceback" not in err
    return lines[-1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-step run: its config is at RUN/../config.yaml."""
    tmp = tmp_path_factory.mktemp("faults")
    cfg = write_yaml(tmp / "config.yaml", tiny_config(tmp, "transformer", **CONFIG))
    return train_job.train(load_config(cfg)).run


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the trained run and a config pointing at it: (run_dir, config)."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    raw = yaml.safe_load((trained / "config.yaml").read_text())
    raw["train"]["run_dir"] = str(run)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return run, cfg


def snapshot(run: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(run)): p.read_bytes() for p in [run / "best.pt", *step_checkpoints(run)]
    }


# ----------------------------------------------------------------------------------------------
# kill -9 in the middle of a checkpoint write

WRITER = """
import sys, torch
from pathlib import Path
from nmt.checkpoint import save_checkpoint
run = Path(sys.argv[1])
(run / "checkpoints").mkdir(parents=True)
weights = torch.empty(24 * 2**20 // 4)  # 24 MB: each write takes a while
for step in range(1, 10**6):
    payload = {"config": {}, "tokenizer": {}, "model": {"w": weights.fill_(step)}, "step": step}
    save_checkpoint(run / "checkpoints" / f"step_{step}.pt", payload)
    save_checkpoint(run / "best.pt", payload)
    (run / "checkpoints" / f"step_{step - 2}.pt").unlink(missing_ok=True)
    print(step, flush=True)
"""


def partial_best(run: Path) -> list[Path]:
    """Temp files of best.pt holding some, but not all, of a checkpoint's bytes."""
    out = []
    for p in run.glob(".best.pt.*.tmp"):
        try:
            if 2**20 <= p.stat().st_size < (run / "best.pt").stat().st_size:
                out.append(p)
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    return out


def kill_while_writing(run: Path, timeout: float = 120) -> bool:
    """Start the writer and SIGKILL it half-way through replacing best.pt; False if never seen."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(run)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "1"  # one complete best.pt exists now
        end = time.time() + timeout
        while time.time() < end and proc.poll() is None:
            if partial_best(run):
                proc.kill()  # SIGKILL: no handler, no cleanup
                proc.wait()
                return bool(partial_best(run))
            time.sleep(0.0005)
        return False
    finally:
        proc.kill()
        proc.wait()


def whole(path: Path) -> int:
    """Load a checkpoint and check every weight carries its step: a whole, unmixed write."""
    ck = load_checkpoint(path)
    assert bool((ck["model"]["w"] == ck["step"]).all()), path
    return ck["step"]


def test_kill_during_checkpoint_write_leaves_previous_checkpoint_loadable(tmp_path):
    for attempt in range(4):  # the kill must land while best.pt is being replaced
        run = tmp_path / f"run{attempt}"
        if kill_while_writing(run):
            break
    else:
        pytest.fail("never caught the writer in the middle of a write")
    assert whole(run / "best.pt") >= 1
    steps = step_checkpoints(run)
    assert steps and all(whole(p) for p in steps)
    (leftover,) = partial_best(run)  # the interrupted write left half a file behind ...
    with pytest.raises(NmtError, match="corrupt or truncated"):
        load_checkpoint(leftover)
    # ... which no lookup ever returns as a checkpoint
    assert resolve(run) == run / "best.pt"
    assert resolve(run, prefer="latest") == steps[-1]
    assert leftover not in steps


# ----------------------------------------------------------------------------------------------
# Disk full while writing a checkpoint, a translation or a report


def test_disk_full_during_checkpoint_write(run, monkeypatch, capsys):
    run_dir, cfg = run
    before = snapshot(run_dir)

    def torch_save_on_full_disk(obj: Any, path: Any) -> None:
        Path(path).write_bytes(b"PK\x03\x04 half a checkpoint")
        raise ENOSPC

    monkeypatch.setattr(torch, "save", torch_save_on_full_disk)
    assert main(["train", str(cfg), "--resume", "--set", "train.max_steps=3"]) == 2
    line = error_line(capsys.readouterr().err)
    assert line == (
        f"nmt: error: cannot write {run_dir / 'checkpoints' / 'step_3.pt'}: No space "
        f"left on device (disk full?); the previous file, if any, is intact"
    )
    assert snapshot(run_dir) == before and whole_run_loads(run_dir)
    assert tmp_files(run_dir) == []


def whole_run_loads(run_dir: Path) -> bool:
    return all(
        load_checkpoint(p)["step"] == 2 for p in [run_dir / "best.pt", *step_checkpoints(run_dir)]
    )


def test_real_write_failure_in_torch_save_is_one_line(run):
    """No monkeypatching: the file-size limit makes the kernel refuse the write (EFBIG), which
    torch reports as a RuntimeError; it must still be one line with the checkpoint intact."""
    run_dir, cfg = run
    before = snapshot(run_dir)
    limit = 600_000  # the checkpoint is larger; spm.model, config and logs are smaller
    assert min(len(b) for b in before.values()) > limit > (run_dir / "spm.model").stat().st_size

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "nmt", "train", str(cfg), "--resume", "--set", "train.max_steps=3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=limit_file_size,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc.stderr)
    assert line.startswith(
        f"nmt: error: cannot write {run_dir / 'checkpoints' / 'step_3.pt'}: write failed ("
    )
    assert line.endswith("(disk full?); the previous file, if any, is intact")
    assert snapshot(run_dir) == before and tmp_files(run_dir) == []


def test_disk_full_while_writing_a_translation_keeps_the_old_output(
    run, tmp_path, monkeypatch, capsys
):
    run_dir, _ = run
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("le\nla\n")
    out.write_text("previous output\n")

    def fsync_on_full_disk(fd: int) -> None:  # delayed allocation reports ENOSPC at fsync
        raise ENOSPC

    monkeypatch.setattr(os, "fsync", fsync_on_full_disk)
    assert main(["translate", str(run_dir), "-i", str(src), "-o", str(out)]) == 2
    assert error_line(capsys.readouterr().err) == (
        f"nmt: error: cannot write {out}: No space left on device (disk full?); the previous "
        f"file, if any, is intact"
    )
    assert out.read_text() == "previous output\n"
    assert tmp_files(tmp_path) == []


class HalfWrite:
    """A file whose write stores half the bytes, then fails like a full disk."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def write(self, data: bytes) -> int:
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise ENOSPC

    def __enter__(self) -> "HalfWrite":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.f.close()


def evaluate_on_full_disk(run_dir: Path, tmp_path: Path, monkeypatch, capsys) -> tuple[int, str]:
    import nmt.files

    def open_on_full_disk(path: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
        f = open(path, mode, *a, **k)
        return HalfWrite(f) if any(m in mode for m in "wxa") else f

    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("le\nla\n")
    ref.write_text("hu\nhu\n")
    monkeypatch.setattr(nmt.files, "open", open_on_full_disk, raising=False)
    code = main(
        [
            "evaluate",
            str(run_dir),
            "--src",
            str(src),
            "--ref",
            str(ref),
            "--report",
            str(tmp_path / "report"),
        ]
    )
    return code, capsys.readouterr().err


def test_disk_full_while_writing_a_report_is_one_line_and_leaves_no_report(
    run, tmp_path, monkeypatch, capsys
):
    code, err = evaluate_on_full_disk(run[0], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "No space left on device" in error_line(err)
    report = tmp_path / "report"
    assert not report.exists() or list(report.iterdir()) == []


def test_disk_full_while_writing_a_report_names_the_file(run, tmp_path, monkeypatch, capsys):
    _, err = evaluate_on_full_disk(run[0], tmp_path, monkeypatch, capsys)
    assert error_line(err).startswith(
        f"nmt: error: cannot write {tmp_path / 'report' / 'hyps.txt'}: No space left on device"
    )


# ----------------------------------------------------------------------------------------------
# Out of memory on a training batch


def test_out_of_memory_on_a_batch_is_one_line_suggesting_a_smaller_batch(run, monkeypatch, capsys):
    from nmt.training.trainer import Trainer

    run_dir, cfg = run
    before = snapshot(run_dir)

    def forward_out_of_memory(self: Trainer, batch: Any) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(Trainer, "_forward_loss", forward_out_of_memory)
    assert main(["train", str(cfg), "--resume", "--set", "train.max_steps=4"]) == 2
    line = error_line(capsys.readouterr().err)
    assert "out of memory" in line and "'data.batch_tokens'" in line
    assert snapshot(run_dir) == before
