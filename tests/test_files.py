"""atomic_dir: an export directory appears complete, readable like any other directory, and an
overwrite leaves the old export or the new one, never neither, even when killed halfway."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.files import atomic_dir

ROOT = Path(__file__).resolve().parent.parent


def export(out: Path, text: str) -> None:
    with atomic_dir(out) as tmp:
        (tmp / "model.bin").write_text(text)
        (tmp / "sub").mkdir()


@pytest.fixture
def umask():
    """Set a umask for the test and put the old one back."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002], ids=oct)
def test_the_directory_has_the_mode_the_umask_gives(tmp_path, umask, mask):
    umask(mask)
    export(tmp_path / "ct2", "new")
    for d in (tmp_path / "ct2", tmp_path / "ct2" / "sub"):
        assert oct(d.stat().st_mode & 0o777) == oct(0o777 & ~mask), d


def test_an_overwrite_replaces_the_old_export_and_leaves_nothing_beside_it(tmp_path):
    export(tmp_path / "ct2", "old")
    export(tmp_path / "ct2", "new")
    assert (tmp_path / "ct2" / "model.bin").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"]


def test_a_failing_build_keeps_the_old_export(tmp_path):
    export(tmp_path / "ct2", "old")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "ct2") as tmp:
        (tmp / "model.bin").write_text("half")
        raise RuntimeError("converter failed")
    assert (tmp_path / "ct2" / "model.bin").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"]


def test_a_failing_rename_into_place_keeps_the_old_export(tmp_path, monkeypatch):
    out = tmp_path / "ct2"
    export(out, "old")
    real_rename, failed = os.rename, []

    def rename(src, dst):  # the new export cannot take its place (putting the old back can)
        if Path(dst) == out and not failed:
            failed.append(src)
            raise OSError(28, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError):
        export(out, "new")
    monkeypatch.undo()
    assert (out / "model.bin").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"]


KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
from nmt.files import atomic_dir
out, real_rename = Path(sys.argv[1]), os.rename
def rename(src, dst):  # SIGKILL just before the new export is renamed into place
    if Path(dst) == out:
        os.kill(os.getpid(), signal.SIGKILL)
    real_rename(src, dst)
os.rename = rename
with atomic_dir(out) as tmp:
    (tmp / "model.bin").write_text("new")
"""


def test_a_kill_between_the_renames_is_undone_by_the_next_export(tmp_path):
    out = tmp_path / "ct2"
    export(out, "old")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)], cwd=ROOT, timeout=60
    )
    assert killed.returncode == -9
    # The next export starts by putting the old one back, so a failing build still leaves it.
    with pytest.raises(RuntimeError), atomic_dir(out):
        assert (out / "model.bin").read_text() == "old"
        raise RuntimeError("converter failed")
    assert (out / "model.bin").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".tmp")] == ["ct2"]
    export(out, "new")
    assert (out / "model.bin").read_text() == "new"
