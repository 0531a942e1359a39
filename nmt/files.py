"""Atomic file writes: a crash, kill -9 or full disk never leaves a half-written file behind; and
the lock files that keep two processes from writing the same thing at once."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from nmt.errors import NmtError

Content = Union[str, bytes, Callable[[Path], None]]


def atomic_write(path: str | os.PathLike, content: Content) -> None:
    """Write text, bytes, or whatever `content(tmp_path)` writes, to a temp file in the same
    directory; fsync and rename it over `path`. On failure `path` is untouched and the temp file
    removed; an OSError (disk full, permissions) becomes one NmtError line naming `path`."""
    path = Path(path)
    # A unique name opened by us (not mkstemp, whose 0600 mode would survive the rename).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if callable(content):
            content(tmp)
        else:
            with open(tmp, "xb") as f:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise NmtError(
            f"cannot write {path}: {e.strerror or e} (disk full?); the previous file, "
            f"if any, is intact"
        ) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(out: Path) -> Iterator[Path]:
    """A temp directory beside `out` to fill; renamed over `out` when the block ends, removed when
    it fails, so an exporter never leaves a half-written model directory behind."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def refuse_to_replace(paths: list[Path], where: str | os.PathLike, overwrite: bool) -> None:
    """A one-line error naming the files of `paths` that exist, unless `overwrite`."""
    existing = [p.name for p in paths if p.exists()]
    if existing and not overwrite:
        raise NmtError(
            f"{where} already holds {', '.join(existing)}; pass --overwrite to replace them"
        )


@contextmanager
def locked(path: Path, on_wait: Optional[Callable[[], None]] = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created if missing) for the block; the kernel
    drops it when its holder dies, even by SIGKILL. `on_wait` is called once if another process
    holds it, before waiting for it."""
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
