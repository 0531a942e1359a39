"""COMET sentence scores (Rei et al. 2020), only when the user has installed unbabel-comet and
names a local checkpoint: nothing is downloaded at run time (the hub is switched off while the
model loads, so a checkpoint whose encoder is not cached fails with COMET's own message)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from nmt.errors import NmtError


@contextmanager
def _offline():
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def comet_scores(
    model_path: str,
    srcs: list[str],
    hyps: list[str],
    refs: list[str],
    batch_size: int = 16,
    gpus: int = 0,
) -> list[float]:
    """One COMET score per sentence from the local checkpoint `model_path` (a .ckpt file)."""
    path = Path(model_path)
    if not path.is_file():
        raise NmtError(
            f"--comet-model {path}: no such file; name a local COMET checkpoint "
            f"(e.g. wmt22-comet-da/checkpoints/model.ckpt), nothing is downloaded"
        )
    try:
        from comet import load_from_checkpoint
    except ImportError:
        raise NmtError(
            "--comet-model needs the unbabel-comet package: pip install unbabel-comet"
        ) from None
    with _offline():
        model = load_from_checkpoint(str(path))
        out = model.predict(
            [{"src": s, "mt": h, "ref": r} for s, h, r in zip(srcs, hyps, refs)],
            batch_size=batch_size,
            gpus=gpus,
            progress_bar=False,
        )
    return [float(x) for x in out.scores]
