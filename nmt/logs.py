"""Log lines to stderr (above a progress bar) and, on rank 0 of a run, to RUN/train.log.

Every command sets this up once; `nmt study` tags each model's lines.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional

from tqdm import tqdm

from nmt.run_dir import RunDir


class _AboveProgressBar(logging.StreamHandler):
    """Writes each record on its own line: tqdm.write clears a progress bar drawn on the same
    stream, prints the record and redraws the bar below it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except BrokenPipeError:  # the reader went away (`| head`): the work goes on, unseen
            self.stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - kept open
        except Exception:
            self.handleError(record)


def setup_logging(run: Optional[RunDir] = None, rank: int = 0, tag: str = "") -> None:
    """Log lines to stderr (above a progress bar) and, on rank 0 of a run, to RUN/train.log;
    `tag` marks each line (`nmt study` names the model when models train side by side)."""
    root = logging.getLogger("nmt")
    root.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    for h in list(root.handlers):
        if getattr(h, "_nmt", False):
            root.removeHandler(h)
            h.close()
    tag = f"[{tag}] " if tag else ""
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {tag}%(message)s", "%H:%M:%S")
    handlers: list[logging.Handler] = [_AboveProgressBar(sys.stderr)]
    if run is not None and rank == 0:
        handlers.append(logging.FileHandler(run.log, encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        h._nmt = True  # type: ignore[attr-defined]
        root.addHandler(h)
    root.propagate = False
