"""Checkpoints: written atomically, loaded with `weights_only=True`, self-contained.

A checkpoint carries the resolved config and the sentencepiece models, so `nmt evaluate` and
`nmt translate` need nothing else. Only plain containers, numbers, strings, bytes and tensors are
stored, which is what lets `torch.load(..., weights_only=True)` refuse anything that would run code.
"""

from __future__ import annotations

import errno
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import torch

from nmt.config import Config
from nmt.config.load import from_dict
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.files import atomic_write
from nmt.run_dir import RunDir
from nmt.version import __version__

FORMAT_VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"  # how every file torch.save writes begins

if TYPE_CHECKING:
    from nmt.models import NMTModel


def _torch_save(payload: dict, path: Path) -> None:
    # torch's zip writer reports a failed write (disk full, file too large) as a RuntimeError;
    # serialising plain containers and tensors fails for no other reason, so it is an OSError.
    try:
        torch.save(payload, path)
    except RuntimeError as e:
        raise OSError(errno.EIO, f"write failed ({str(e).splitlines()[0][:200]})") from None


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Write a checkpoint dict atomically (stamped with the format version)."""
    payload = {"format_version": FORMAT_VERSION, "nmt_version": __version__, **payload}
    atomic_write(path, lambda tmp: _torch_save(payload, tmp))


def tokenizer_payload(tok: Tokenizer) -> dict:
    return {"src": tok.src_proto, "tgt": tok.tgt_proto, "lowercase": tok.lowercase}


def tokenizer_from_payload(p: dict, where: str = "the checkpoint") -> Tokenizer:
    try:
        return Tokenizer(p["src"], p["tgt"], p["lowercase"])
    except NmtError as e:
        raise NmtError(f"the subword model in {where} is unusable: {e}") from None
    except Exception:  # sentencepiece raises RuntimeError on bytes that are not a model
        raise NmtError(f"the subword model in {where} is missing or corrupt") from None


def load_checkpoint(path: str | Path) -> dict:
    """Load and check a checkpoint; every failure is one NmtError line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"checkpoint not found: {path}")
    if _other_file(path):
        raise NmtError(
            f"{path} is not an nmt checkpoint (a .pt file written by nmt train) or run directory"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # The weights-only unpickler names the opcode when it meets a class or function (what
        # a malicious pickle needs); every other failure is damaged bytes.
        if "GLOBAL " in str(e):
            raise NmtError(
                f"refusing to load {path}: it contains pickled Python objects that could "
                f"run code (only tensors and plain data are allowed)"
            ) from None
        raise NmtError(f"checkpoint {path} is corrupt or truncated") from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, AttributeError, TypeError):
        raise NmtError(f"checkpoint {path} is corrupt or truncated") from None
    if (
        not isinstance(ckpt, dict)
        or not isinstance(ckpt.get("format_version"), int)
        or not isinstance(ckpt.get("model"), dict)
        or not isinstance(ckpt.get("config"), dict)
    ):
        raise NmtError(f"{path} is not an nmt checkpoint")
    if ckpt["format_version"] > FORMAT_VERSION:
        raise NmtError(
            f"checkpoint {path} was written by a newer nmt (format "
            f"{ckpt['format_version']}, this version reads up to {FORMAT_VERSION}); "
            f"upgrade nmt"
        )
    if not isinstance(ckpt.get("tokenizer"), dict):
        raise NmtError(f"checkpoint {path} carries no subword model")
    return ckpt


def _other_file(path: Path) -> bool:
    """Whether `path` is some other file given by mistake (a README, a text corpus), not a
    damaged checkpoint: not torch's zip format, and text or not named *.pt. A truncated or
    overwritten checkpoint keeps its binary bytes (and its name), and is called corrupt."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False  # torch.load reports it
    if not head or head[:4] == ZIP_MAGIC[: len(head[:4])]:
        return False
    return path.suffix != ".pt" or _is_text(head)


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not just a character cut by the end of the read
            return False
    return b"\x00" not in head


def imported_from(path: str | Path) -> Optional[str]:
    """The model a checkpoint was imported from (`nmt import`), or None for one trained here (or
    a file that does not load: its loader says why). Its tensors are mapped, not read."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # any failure: load_checkpoint names it
        return None
    origin = ckpt.get("imported_from") if isinstance(ckpt, dict) else None
    return origin if isinstance(origin, str) else None


def config_of(ckpt: dict, where: str) -> Config:
    return from_dict(ckpt["config"], f"the config stored in {where}", stored=True)


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """Step checkpoints of a run, oldest first."""
    return RunDir(run_dir).step_checkpoints()


def resolve(path_or_run: str | Path, prefer: str = "best") -> Path:
    """A checkpoint file, or a run directory's best (prefer='best') or latest checkpoint."""
    p = Path(path_or_run)
    return p if p.is_file() else RunDir(p).checkpoint(prefer)


def model_payload(model: torch.nn.Module) -> dict:
    module = getattr(model, "module", model)  # unwrap DDP
    module = getattr(module, "_orig_mod", module)  # unwrap torch.compile
    return module.state_dict()


def load_model(
    path_or_run: str | Path, device: str | torch.device = "cpu"
) -> tuple[Config, "NMTModel", Tokenizer, dict]:
    """Everything inference needs from one checkpoint: config, model (eval mode), tokenizer."""
    from nmt.models import build_model

    path = resolve(path_or_run)
    ckpt = load_checkpoint(path)
    cfg = config_of(ckpt, str(path))
    tok = tokenizer_from_payload(ckpt["tokenizer"], str(path))
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise NmtError(
            f"checkpoint {path} does not fit its '{cfg.model.arch}' model: "
            f"{str(e).splitlines()[1].strip() if len(str(e).splitlines()) > 1 else e}"
        ) from None
    model.to(device).eval()
    return cfg, model, tok, {"path": str(path), "step": ckpt.get("step", 0)}


# ----------------------------------------------------------------------------------------------
# Ensembles and averaged checkpoints


def _pieces(sp) -> list[str]:
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def _check_same_vocabulary(first: Tokenizer, other: Tokenizer, a: str, b: str) -> None:
    for side in ("target", "source"):
        x, y = (first.tgt, other.tgt) if side == "target" else (first.src, other.src)
        if _pieces(x) != _pieces(y) or first.lowercase != other.lowercase:
            raise NmtError(
                f"cannot ensemble {a} and {b}: their {side} vocabularies differ "
                f"(members must share the subword models)"
            )


def load_models(
    targets: list[str], device: str | torch.device = "cpu"
) -> tuple[Config, "NMTModel", Tokenizer, dict]:
    """One checkpoint as load_model does, or several as one Ensemble (first member's config)."""
    if len(targets) == 1:
        return load_model(targets[0], device)
    from nmt.models.ensemble import Ensemble

    loaded = [load_model(t, device) for t in targets]
    cfg, _, tok, meta = loaded[0]
    for _, _, other, m in loaded[1:]:
        _check_same_vocabulary(tok, other, meta["path"], m["path"])
    model = Ensemble([m for _, m, _, _ in loaded]).to(device).eval()
    return (
        cfg,
        model,
        tok,
        {"path": meta["path"], "step": meta["step"], "ensemble": [m["path"] for *_, m in loaded]},
    )


def average_checkpoints(paths: list[str | Path], out: str | Path) -> dict:
    """Average the models of `paths` (same architecture and vocabulary) in fp32 into `out`.

    The result carries the last checkpoint's config, subword models and step (no optimiser
    state: an average is for decoding or for starting anew), so it works wherever a
    checkpoint does. Returns the payload written."""
    if not paths:
        raise NmtError("nothing to average: no checkpoints given")
    ckpts = [load_checkpoint(p) for p in paths]
    last = ckpts[-1]
    total: dict[str, torch.Tensor] = {}
    for path, ck in zip(paths, ckpts):
        same = (
            ck["config"].get("model") == last["config"].get("model")
            and ck["tokenizer"] == last["tokenizer"]
            and ck["model"].keys() == last["model"].keys()
        )
        if not same:
            raise NmtError(
                f"cannot average {path} with {paths[-1]}: different models (the "
                f"model config, vocabulary and parameters must match)"
            )
        for k, v in ck["model"].items():
            if v.is_floating_point():
                total[k] = total.get(k, 0) + v.float()
    state = {
        k: (total[k] / len(ckpts)).to(v.dtype) if v.is_floating_point() else v
        for k, v in last["model"].items()
    }
    training_state = (
        "optimizer",
        "schedule",
        "scaler",
        "progress",
        "rng",
        "rng_ranks",
        "bookmark",
        "format_version",
        "nmt_version",
    )
    payload = {
        **{k: v for k, v in last.items() if k not in training_state},
        "model": state,
        "averaged_from": [str(p) for p in paths],
    }
    save_checkpoint(out, payload)
    return payload


def checkpoints_to_average(targets: list[str], last: int | None) -> list[Path]:
    """`nmt average` inputs: the last N step checkpoints of one run, or the given checkpoints."""
    if last is None:
        return [resolve(t) for t in targets]
    if len(targets) != 1 or not Path(targets[0]).is_dir():
        raise NmtError(f"--last {last} takes one run directory, got {' '.join(targets)}")
    steps = step_checkpoints(targets[0])
    if len(steps) < last:
        raise NmtError(
            f"--last {last}: run directory {targets[0]} holds {len(steps)} step "
            f"checkpoint(s) (train.keep_last keeps that many)"
        )
    return steps[-last:]
