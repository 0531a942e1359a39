"""Ragged id sequences (one row per sentence) over flat numpy buffers.

A column is a list of chunks, each a flat `values` array and its `offsets` (row r of a chunk is
values[offsets[r]:offsets[r + 1]]). Chunks come from Arrow record batches of a memory-mapped file
(no copy: the ids stay in the page cache, shared by every process mapping the file) or from
in-memory lists (validation). Rows are only read when a batch is built.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class IdColumn:
    def __init__(self, chunks: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.chunks = chunks
        sizes = [len(off) - 1 for _, off in chunks]
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    @classmethod
    def from_lists(cls, seqs: Sequence[Sequence[int]]) -> "IdColumn":
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        values = np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(offsets[-1]))
        return cls([(values, offsets)])

    @classmethod
    def from_arrow(cls, column) -> "IdColumn":
        """A pyarrow (Chunked)Array of list<int>: zero-copy views of each chunk's buffers."""
        chunks = column.chunks if hasattr(column, "chunks") else [column]
        return cls([(_view(c.values), _view(c.offsets)) for c in chunks if len(c)])

    def lengths(self) -> np.ndarray:
        """Tokens per row, as int32 (read from the offsets only, never from the ids)."""
        if not self.chunks:
            return np.zeros(0, dtype=np.int32)
        return np.concatenate([np.diff(off) for _, off in self.chunks]).astype(np.int32)

    def rows(self, index: np.ndarray) -> list[np.ndarray]:
        """The id arrays of these rows (views into the buffers)."""
        index = np.asarray(index, dtype=np.int64)
        chunk = np.searchsorted(self.starts, index, side="right") - 1
        local = index - self.starts[chunk]
        out = []
        for c, r in zip(chunk.tolist(), local.tolist()):
            values, off = self.chunks[c]
            out.append(values[off[r] : off[r + 1]])
        return out


def _view(array) -> np.ndarray:
    """A numpy view of a primitive Arrow array without nulls, straight from its data buffer.
    (pyarrow's `to_numpy` imports pandas on first use: 32 MB of private memory per process.)"""
    if array.null_count:
        raise ValueError("an id column with nulls")  # never written by nmt prepare
    dtype = np.dtype(str(array.type))
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize
    )
