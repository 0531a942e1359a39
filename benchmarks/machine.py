"""What every measurement records about the machine it ran on, and how it writes its JSON.

Timings on a shared machine are only comparable within one run: each result names the CPU
(lscpu's model name), its SIMD flags and the load while it ran.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout
    except OSError:  # no lscpu (macOS) or no uptime: the record says less, the run goes on
        return ""


@lru_cache(maxsize=1)
def lscpu() -> dict[str, str]:
    """lscpu's fields by name ("Model name", "CPU(s)", "Flags", ...); empty without lscpu."""
    return {
        k.strip(): v.strip()
        for k, _, v in (line.partition(":") for line in _run(["lscpu"]).splitlines())
        if v
    }


def cpu_model() -> str:
    return lscpu().get("Model name") or platform.processor() or "?"


def cpu_flags() -> list[str]:
    return lscpu().get("Flags", "").split()


def simd_flags() -> list[str]:
    """The flags that decide matmul speed (AVX2/512, FMA, AMX, VNNI, F16C)."""
    return sorted(
        f for f in cpu_flags() if f.startswith(("avx", "fma", "amx", "f16c")) or "vnni" in f
    )


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def uptime() -> str:
    """`uptime`'s line: the load averages and how long the machine has run."""
    return _run(["uptime"]).strip()


def machine() -> dict:
    """The common record: CPU model, lscpu's family and model numbers (which tell a Zen 4 from a
    Zen 5 where both are "AMD EPYC"), cores, SIMD flags, load, Python."""
    return {
        "cpu": cpu_model(),
        "cpu_family": lscpu().get("CPU family", "?"),
        "cpu_model_number": lscpu().get("Model", "?"),
        "cores": os.cpu_count(),
        "simd_flags": simd_flags(),
        "load": load_avg(),
        "python": platform.python_version(),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_json(path: str | Path, result: dict, indent: int = 2) -> str:
    """Write `result` to `path` (one trailing newline); return the text."""
    text = json.dumps(result, indent=indent)
    Path(path).write_text(text + "\n", encoding="utf-8")
    return text
