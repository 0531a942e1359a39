"""Id rows of the prepared corpus read from its Arrow files with `os.pread`, not through a map.

Reading a row through a memory map leaves its pages mapped in the process (with their
neighbours: the kernel maps 64 KB around each fault), so over an epoch of random rows a rank's
RSS grows towards the size of the corpus, which is what `top` and a scheduler's memory limit see:
a fifth of an epoch of batches from a 2M-pair corpus (234 MB of Arrow files) left RSS at 545 MB,
against 303 MB for a whole epoch of 100k pairs. `pread` copies just the row's ids out of the page
cache (still one copy for every rank on the machine) and nothing stays mapped: 327 MB and 292 MB.

The files are mapped once at open, only to find where each record batch's buffers lie (pyarrow
reads the IPC stream's metadata, zero-copy: a buffer's address minus the map's is its offset in
the file), and unmapped again.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import numpy as np

from nmt.data.ragged import IdColumn


class FileIdColumn(IdColumn):
    """One list<int> column of Arrow IPC stream files: per record batch, where its offsets and
    values lie in which file; rows are read on demand."""

    def __init__(self, fds: list[int], chunks: list[tuple[int, int, int, np.dtype, int]]) -> None:
        # chunk: (file index, offsets position, values position, id dtype, rows); int32 offsets
        self.fds, self.chunks = fds, chunks
        self._closer = weakref.finalize(self, _close, fds)  # when collected, or at exit
        self.starts = np.concatenate([[0], np.cumsum([c[4] for c in chunks], dtype=np.int64)])

    @classmethod
    def open(cls, files: list[Path], names: tuple[str, ...]) -> list["FileIdColumn"]:
        """The columns `names` of these files (in order: their rows follow one another)."""
        import pyarrow as pa

        chunks: dict[str, list] = {n: [] for n in names}
        for i, path in enumerate(files):
            mapped = pa.memory_map(str(path))
            try:
                table = pa.ipc.open_stream(mapped).read_all()
                mapped.seek(0)
                base, size = mapped.read_buffer(1).address, mapped.size()
                for name in names:
                    for c in table.column(name).chunks:
                        if len(c):
                            chunks[name].append((i, *_where(c, base, size, path, name), len(c)))
                del table
            finally:
                mapped.close()
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        return [cls([os.open(f, flags) for f in files], chunks[n]) for n in names]

    def close(self) -> None:
        self._closer()

    def _offsets(self, c: int, first: int, count: int) -> np.ndarray:
        f, at = self.chunks[c][:2]
        raw = os.pread(self.fds[f], 4 * count, at + 4 * first)
        return np.frombuffer(raw, dtype=np.int32)

    def lengths(self) -> np.ndarray:
        """Tokens per row, as int32 (from the offsets, one read per record batch)."""
        if not self.chunks:
            return np.zeros(0, dtype=np.int32)
        return np.concatenate(
            [np.diff(self._offsets(c, 0, ch[4] + 1)) for c, ch in enumerate(self.chunks)]
        ).astype(np.int32)

    def rows(self, index: np.ndarray) -> list[np.ndarray]:
        """The id arrays of these rows, copied out of the files (two reads a row)."""
        index = np.asarray(index, dtype=np.int64)
        chunk = np.searchsorted(self.starts, index, side="right") - 1
        local = index - self.starts[chunk]
        out = []
        for c, r in zip(chunk.tolist(), local.tolist()):
            f, _, at, dtype, _ = self.chunks[c]
            lo, hi = self._offsets(c, r, 2).tolist()
            raw = os.pread(self.fds[f], (hi - lo) * dtype.itemsize, at + lo * dtype.itemsize)
            out.append(np.frombuffer(raw, dtype=dtype))
        return out


def _where(c, base: int, size: int, path: Path, name: str) -> tuple[int, int, np.dtype]:
    """Where a mapped list<int> chunk's offsets and values start in its file, and the id type."""
    import pyarrow as pa

    if c.null_count or c.offsets.type != pa.int32():
        raise ValueError(f"{path}: {name} is not a list<int> without nulls")  # nmt writes none
    values, offsets = c.values, c.offsets
    dtype = np.dtype(str(values.type))
    at = (
        offsets.buffers()[1].address - base + offsets.offset * 4,
        values.buffers()[1].address - base + values.offset * dtype.itemsize,
    )
    if not all(0 <= a < size for a in at):  # a buffer pyarrow copied is not in the file
        raise ValueError(f"{path}: {name} is not stored uncompressed in place")
    return (*at, dtype)


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
