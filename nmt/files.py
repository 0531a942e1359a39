"""Atomic file writes: a crash, kill -9 or full disk never leaves a half-written file behind; the
lock files that keep two processes from writing the same thing at once; and the user's cache
folder."""

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


def cache_root() -> Path:
    """The user's cache folder: $NMT_CACHE, default ~/.cache/nmt (prepared corpora, synthetic
    corpora, compiled kernels)."""
    return Path(os.environ.get("NMT_CACHE", Path.home() / ".cache" / "nmt"))


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
    """A temp directory beside `out` to fill; when the block ends it replaces `out` (with the
    mode of any directory made under the umask), and when the block fails it is removed and
    `out` is untouched, so an exporter never leaves a half-written model directory behind.

    The old `out` is renamed aside, the new one renamed into place, then the old one deleted. A
    kill between the two renames leaves the old export at `.{out.name}.old` and no `out`; the
    next `atomic_dir(out)` moves it back before it starts (or deletes it if `out` came back)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    aside = out.with_name(f".{out.name}.old")
    _recover(out, aside)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would survive the rename
        if out.exists() or out.is_symlink():
            os.rename(out, aside)
            try:
                os.rename(tmp, out)
            except BaseException:
                os.rename(aside, out)
                raise
            try:
                _remove(aside)
            except OSError:
                pass  # the export is in place; the next atomic_dir(out) deletes what is left
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _recover(out: Path, aside: Path) -> None:
    """Undo what a kill in the middle of `atomic_dir`'s replacement left: the old export aside
    goes back to `out` if `out` is missing, or away if the new one made it into place."""
    if not (aside.exists() or aside.is_symlink()):
        return
    if out.exists() or out.is_symlink():
        _remove(aside)
    else:
        os.rename(aside, out)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _umask() -> int:
    """The process's umask (read by setting it, the only portable way, and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
