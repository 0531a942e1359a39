"""A training process keeps the memory a step frees for the next step (glibc's heap policy)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = """
import resource, sys, torch
from nmt.data.heap import keep_freed_memory
if sys.argv[1] == "keep":
    keep_freed_memory()
def step(i):  # three activations of a batch-dependent size (6-10 MB), freed at its end
    xs = [torch.empty((3 << 19) + (i % 5) * (1 << 18)).fill_(1) for _ in range(3)]
    return float(sum(x[0] for x in xs))
for i in range(3):
    step(i)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(20):
    step(i)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def _faults_per_step(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", STEPS, mode], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc policy")
def test_freed_step_memory_is_reused_instead_of_faulting_in_again():
    pages = 3 * (6 << 20) // 4096  # at least what a step touches
    plain, keep = _faults_per_step("plain"), _faults_per_step("keep")
    assert plain > pages / 10  # glibc gave some of it back (how much varies: 1-5 thousand)
    assert keep < pages / 15 and keep < plain / 3


def test_training_caps_onednns_kernel_cache_unless_the_user_set_it(monkeypatch):
    from nmt.data.heap import ONEDNN_CACHE, bound_kernel_cache

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == ONEDNN_CACHE
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "256")
    bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "256"  # the user's choice stands
