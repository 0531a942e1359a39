"""Raw parallel text for each split role, from the hub, local files or the built-in corpus.

Every source goes through HuggingFace `datasets` (`load_dataset`), so hub and local files share one
code path. Local files are also checked line by line here, so a bad byte, a count mismatch or a
malformed row is reported with its file and line, and the checked lines win wherever `datasets`
would read them differently.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from itertools import zip_longest
from pathlib import Path
from typing import Any, Iterator

from nmt.config import DataConfig
from nmt.data import split_slice
from nmt.errors import NmtError
from nmt.files import cache_root

Pairs = tuple[list[str], list[str]]


def _open(path: Path):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise NmtError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise NmtError(f"expected a file, found a directory: {path}") from None
    except OSError as e:
        raise NmtError(f"cannot read {path}: {e.strerror}") from None


def _decode(line: bytes, i: int, name: str) -> str:
    """One line (without its '\\n') as text, naming the line (1-based) if it is not UTF-8."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NmtError(
            f"{name}, line {i}: not valid UTF-8 (byte 0x{line[e.start]:02x} at "
            f"column {e.start + 1})"
        ) from None
    text = text.removesuffix("\r")
    return text[1:] if i == 1 and text.startswith("\ufeff") else text


def iter_lines(path: str | Path) -> Iterator[str]:
    """Lines of a UTF-8 file split on '\\n' only, streamed (no line is dropped, merged or
    shifted); the file is opened now, so a missing file fails before the first line is asked."""
    path = Path(path)
    f = _open(path)

    def lines() -> Iterator[str]:
        with f:
            for i, raw in enumerate(f, 1):  # binary files split on b"\\n" only
                yield _decode(raw.removesuffix(b"\n"), i, str(path))

    return lines()


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 file split on '\\n' only (no line is dropped, merged or shifted)."""
    return list(iter_lines(path))


def split_lines(data: bytes, name: str) -> list[str]:
    """Decode UTF-8 bytes into lines, naming the first bad line (1-based) of `name`."""
    if not data:
        return []
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    return [_decode(line, i, name) for i, line in enumerate(raw, 1)]


def _datasets():
    import datasets  # imported lazily: it is slow to import and only needed when loading data

    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    return datasets


def _text(value: Any, where: str, i: int, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise NmtError(
            f"{where}, line {i}: expected text for '{key}', found "
            f"{type(value).__name__} {value!r:.40}"
        )
    return value


def _translation_pair(t: Any, src: str, tgt: str, where: str, i: int) -> tuple[str, str]:
    if not isinstance(t, dict) or src not in t or tgt not in t:
        keys = sorted(t) if isinstance(t, dict) else type(t).__name__
        raise NmtError(
            f"{where}, line {i}: expected language keys '{src}' and '{tgt}' "
            f"in 'translation', found {keys}"
        )
    return _text(t[src], where, i, src), _text(t[tgt], where, i, tgt)


def _columns_error(where: str, src: str, tgt: str, found) -> NmtError:
    return NmtError(
        f"{where}: expected a 'translation' column or columns '{src}' and '{tgt}', "
        f"found columns {sorted(found)}"
    )


def _pairs_from_rows(
    rows: dict[str, list[Any]], src: str, tgt: str, where: str, first: int = 1
) -> Pairs:
    """Shared by hub and local sources: a `translation` column of dicts, or one column per
    language; `first` is the line number of the first row (for rows read in batches)."""
    if "translation" in rows:
        pairs = [
            _translation_pair(t, src, tgt, where, i)
            for i, t in enumerate(rows["translation"], first)
        ]
        return [s for s, _ in pairs], [t for _, t in pairs]
    if src in rows and tgt in rows:
        return (
            [_text(s, where, i, src) for i, s in enumerate(rows[src], first)],
            [_text(t, where, i, tgt) for i, t in enumerate(rows[tgt], first)],
        )
    raise _columns_error(where, src, tgt, rows)


def _checked(ds_rows, ours: dict[str, list]) -> dict[str, list]:
    """Rows as `datasets` read them when they agree with the lines checked here; otherwise the
    checked ones, so a parser quirk (a lone '\r', a Unicode line break, a schema it cannot
    infer) never splits, shifts or loses a sentence."""
    try:
        got = ds_rows()
    except Exception:  # noqa: BLE001 - any parser failure: the checked lines are the truth
        return ours
    return got if got == ours else ours


def _load_text(cfg: DataConfig, base: Path, name: str) -> Pairs:
    paths = [base / f"{name}.{cfg.src_lang}", base / f"{name}.{cfg.tgt_lang}"]
    checked = [read_lines(p) for p in paths]
    if len(checked[0]) != len(checked[1]):
        raise NmtError(
            f"line counts differ: {paths[0]} has {len(checked[0])} lines, {paths[1]} has "
            f"{len(checked[1])}"
        )
    ds = _datasets()
    sides = []
    for path, lines in zip(paths, checked):
        rows = {"text": lines}
        if lines:
            rows = _checked(
                lambda: ds.load_dataset("text", data_files={"x": str(path)}, split="x")[:], rows
            )
        sides.append(rows["text"])
    return sides[0], sides[1]


def _load_tsv(cfg: DataConfig, base: Path, name: str) -> Pairs:
    path = base / f"{name}.tsv"
    lines = read_lines(path)
    for i, line in enumerate(lines, 1):
        if line.count("\t") != 1:
            raise NmtError(
                f"{path}, line {i}: expected 2 tab-separated columns, found "
                f"{line.count(chr(9)) + 1}"
            )
    if not lines:
        return [], []
    header = lines[0].split("\t")
    has_header = header == [cfg.src_lang, cfg.tgt_lang] or header == [cfg.tgt_lang, cfg.src_lang]
    columns = header if has_header else [cfg.src_lang, cfg.tgt_lang]
    cells = [line.split("\t") for line in lines[1 if has_header else 0 :]]
    ours = {c: [row[j] for row in cells] for j, c in enumerate(columns)}
    ds = _datasets()
    # Explicit string features: cells like "007", "2016" or "NA" stay verbatim text.
    rows = _checked(
        lambda: ds.load_dataset(
            "csv",
            data_files={"x": str(path)},
            split="x",
            delimiter="\t",
            quoting=3,
            keep_default_na=False,
            column_names=None if has_header else columns,
            features=ds.Features({c: ds.Value("string") for c in columns}),
        )[:],
        ours,
    )
    return _pairs_from_rows(rows, cfg.src_lang, cfg.tgt_lang, str(path))


def _json_record(line: str, i: int, path: Path) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise NmtError(f"{path}, line {i}: invalid JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise NmtError(f"{path}, line {i}: expected a JSON object, found {type(rec).__name__}")
    return rec


def _load_jsonl(cfg: DataConfig, base: Path, name: str) -> Pairs:
    path = base / f"{name}.jsonl"
    records = [_json_record(line, i, path) for i, line in enumerate(read_lines(path), 1)]
    if not records:
        return [], []
    keys = list(dict.fromkeys(k for rec in records for k in rec))
    ours = {k: [rec.get(k) for rec in records] for k in keys}
    rows = _checked(
        lambda: _datasets().load_dataset("json", data_files={"x": str(path)}, split="x")[:], ours
    )
    return _pairs_from_rows(rows, cfg.src_lang, cfg.tgt_lang, str(path))


def _hub_where(cfg: DataConfig) -> str:
    return f"hub dataset {cfg.hub_name}" + (f" ({cfg.hub_config})" if cfg.hub_config else "")


def _hub_dataset(cfg: DataConfig, name: str):
    """The hub split as `datasets` loads it (an Arrow table, memory-mapped from its cache)."""
    where = _hub_where(cfg)
    try:
        return _datasets().load_dataset(cfg.hub_name, cfg.hub_config, split=name)
    except ValueError as e:
        msg = str(e).splitlines()[0]
        if "split" in msg.lower():
            raise NmtError(f"split '{name}' not found in {where}: {msg}") from None
        raise NmtError(f"cannot load {where}: {msg}") from None
    except (ConnectionError, OSError) as e:
        raise NmtError(
            f"cannot load {where} (is the hub reachable?): "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None


def _load_hub(cfg: DataConfig, name: str) -> Pairs:
    ds = _hub_dataset(cfg, name)
    return _pairs_from_rows(ds[:], cfg.src_lang, cfg.tgt_lang, f"{_hub_where(cfg)} split '{name}'")


def synthetic_dir(cfg: DataConfig) -> Path:
    """Where the built-in corpus for these settings is cached (generated on first use)."""
    from nmt.data import synthetic

    key = (
        json.dumps(asdict(cfg.synthetic), sort_keys=True)
        + cfg.src_lang
        + cfg.tgt_lang
        + f"v{synthetic.VERSION}"
    )  # a new generator version never reuses an old corpus
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    out = cache_root() / "synthetic" / digest
    if not (out / "done").exists():
        out.mkdir(parents=True, exist_ok=True)
        synthetic.write_corpus(out, cfg.synthetic, cfg.src_lang, cfg.tgt_lang)
        (out / "done").write_text("ok\n")
    return out


def load_split(cfg: DataConfig, role: str) -> Pairs:
    """Source and target lines of the split with this role (train, valid, test, ...)."""
    name = split_name(cfg, role)
    if cfg.source == "hub":
        return _load_hub(cfg, name)  # `datasets` slices 'train[1000:]' itself
    name, part = split_slice.parse(name)
    base = synthetic_dir(cfg) if cfg.source == "synthetic" else Path(cfg.path)
    if cfg.source == "local" and not base.is_dir():
        raise NmtError(f"data directory not found: {base} (data.path)")
    loader = {"text": _load_text, "tsv": _load_tsv, "jsonl": _load_jsonl}[
        "text" if cfg.source == "synthetic" else cfg.format
    ]
    src, tgt = loader(cfg, base, name)
    return split_slice.take(src, part), split_slice.take(tgt, part)


# ----------------------------------------------------------------------------------------------
# Streaming: the same checks, one line at a time, for training splits too large for a list

PairStream = Iterator[tuple[str, str]]


def _stream_text(cfg: DataConfig, base: Path, name: str) -> PairStream:
    paths = [base / f"{name}.{cfg.src_lang}", base / f"{name}.{cfg.tgt_lang}"]
    sides = [iter_lines(p) for p in paths]  # both opened now: a missing file fails first

    def pairs() -> PairStream:
        n = 0
        for s, t in zip_longest(*sides):
            if s is None or t is None:
                counts = [
                    n + (x is not None) + sum(1 for _ in side) for x, side in zip((s, t), sides)
                ]
                raise NmtError(
                    f"line counts differ: {paths[0]} has {counts[0]} lines, "
                    f"{paths[1]} has {counts[1]}"
                )
            n += 1
            yield s, t

    return pairs()


def _stream_tsv(cfg: DataConfig, base: Path, name: str) -> PairStream:
    path = base / f"{name}.tsv"
    lines = iter_lines(path)

    def pairs() -> PairStream:
        order = None
        for i, line in enumerate(lines, 1):
            if line.count("\t") != 1:
                raise NmtError(
                    f"{path}, line {i}: expected 2 tab-separated columns, found "
                    f"{line.count(chr(9)) + 1}"
                )
            cells = line.split("\t")
            if order is None:
                order = (1, 0) if cells == [cfg.tgt_lang, cfg.src_lang] else (0, 1)
                if cells in ([cfg.src_lang, cfg.tgt_lang], [cfg.tgt_lang, cfg.src_lang]):
                    continue  # a header line
            yield cells[order[0]], cells[order[1]]

    return pairs()


def _stream_jsonl(cfg: DataConfig, base: Path, name: str) -> PairStream:
    path = base / f"{name}.jsonl"
    lines, src, tgt, where = iter_lines(path), cfg.src_lang, cfg.tgt_lang, str(path)

    def pairs() -> PairStream:
        translation = None  # decided by the first record, as one schema holds for the file
        for i, line in enumerate(lines, 1):
            rec = _json_record(line, i, path)
            if translation is None:
                translation = "translation" in rec
                if not translation and not (src in rec and tgt in rec):
                    raise _columns_error(where, src, tgt, rec)
            if translation:
                yield _translation_pair(rec.get("translation"), src, tgt, where, i)
            else:
                yield _text(rec.get(src), where, i, src), _text(rec.get(tgt), where, i, tgt)

    return pairs()


def split_name(cfg: DataConfig, role: str) -> str:
    if cfg.directions:  # which pair of files? nmt.data.directions reads one direction at a time
        raise NmtError(
            f"split '{role}' of a corpus with several directions (data.directions: "
            f"{', '.join(cfg.directions)}) is read one direction at a time"
        )
    if role not in cfg.splits:
        raise NmtError(
            f"split '{role}' is not named in 'data.splits' (have: {', '.join(cfg.splits)})"
        )
    return cfg.splits[role]


def split_files(cfg: DataConfig, role: str) -> list[Path]:
    """The local files a split is read from (none for the hub); the synthetic corpus is written
    here on first use."""
    name = split_slice.parse(split_name(cfg, role))[0]
    if cfg.source == "hub":
        return []
    base = synthetic_dir(cfg) if cfg.source == "synthetic" else Path(cfg.path)
    if cfg.source == "local" and not base.is_dir():
        raise NmtError(f"data directory not found: {base} (data.path)")
    fmt = "text" if cfg.source == "synthetic" else cfg.format
    if fmt == "text":
        return [base / f"{name}.{cfg.src_lang}", base / f"{name}.{cfg.tgt_lang}"]
    return [base / f"{name}.{fmt}"]


def stream_split(cfg: DataConfig, role: str) -> PairStream:
    """(source, target) pairs of a local or synthetic split, checked line by line as they are
    read (the corpus is never held in memory)."""
    name, part = split_slice.parse(split_name(cfg, role))
    base = split_files(cfg, role)[0].parent
    fmt = "text" if cfg.source == "synthetic" else cfg.format
    stream = {"text": _stream_text, "tsv": _stream_tsv, "jsonl": _stream_jsonl}[fmt]
    return split_slice.take_stream(lambda: stream(cfg, base, name), part)


def hub_split(cfg: DataConfig, role: str):
    """A hub split mapped to checked `src` / `tgt` text columns, through `datasets` (on disk,
    memory-mapped; rows are checked in batches, naming the line of a bad one)."""
    name = split_name(cfg, role)
    ds = _hub_dataset(cfg, name)
    where = f"{_hub_where(cfg)} split '{name}'"
    src, tgt = cfg.src_lang, cfg.tgt_lang
    if "translation" not in ds.column_names and not (
        src in ds.column_names and tgt in ds.column_names
    ):
        raise _columns_error(where, src, tgt, ds.column_names)

    def check(rows: dict, idx: list[int]) -> dict:
        s, t = _pairs_from_rows(rows, src, tgt, where, first=idx[0] + 1 if idx else 1)
        return {"src": s, "tgt": t}

    return ds.map(check, batched=True, with_indices=True, remove_columns=ds.column_names)
