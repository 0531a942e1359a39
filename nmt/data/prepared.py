"""The prepared training corpus: ids, lengths and filter decisions in Arrow and .npy files.

`ensure_prepared` reads the training split through `datasets` (checked line by line, streamed),
trains sentencepiece on a sample, encodes with `Dataset.map(num_proc=data.workers)` and writes the
result into a directory keyed by a hash of everything that changes the ids (the data and vocab
sections, the subword seed, the source files' size and mtime, the given subword models, the
versions of this format and of sentencepiece). It is built in a temp directory renamed into place
when complete, under a file lock, so a killed prepare leaves nothing mistaken for complete and
parallel runs build it once. `open_prepared` reads the rows with `pread` (nmt.data.file_rows): every
process reading the same corpus shares one copy in the page cache, and none keeps it mapped. A
multilingual corpus (`data.directions`) holds every direction's pairs one after the other, each
row with its direction (`dir`) and its language tag already in its ids. A config with
`data.train_max_words` gets a corpus that also holds each pair's word count (words.npy), and the
cap is applied when it is opened (nmt.data.word_cap): every cap shares that corpus and its subword
model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from nmt.config import Config, DataConfig
from nmt.data import corpus
from nmt.data.batching import BucketBatcher
from nmt.data.directions import direction_files, stream_directions
from nmt.data.encode_rows import KEEP, FilterStats, encode_rows, id_features
from nmt.data.file_rows import FileIdColumn
from nmt.data.heap import give_back_freed_memory
from nmt.data.subword_sample import train_subwords
from nmt.data.tokenizer import SRC_SUBWORDS, SUBWORD_GLOB, TGT_SUBWORDS, Tokenizer
from nmt.data.word_cap import capped_stats, save_words, within_words
from nmt.errors import NmtError
from nmt.files import cache_root, locked

log = logging.getLogger("nmt")
# 2: lengths and filter decisions also in .npy files; larger record batches. 3: the kept rows
# and their lengths in .npy files, so no rank computes (and holds) its own copy of them.
FORMAT = 3
# Rows per Arrow record batch: each batch's metadata is read when the file is opened, and every
# page fault on a mapped file maps its neighbours too (fault-around, 64 KB), so 1,000-row batches
# put 2 of 5 MB of a 2M-pair corpus in each process's RSS just by opening it.
WRITER_ROWS = 10000
# Arrays the batcher plans from, one contiguous .npy file each (mapped, shared by ranks): the
# filter decision of every pair, and the kept pairs' rows and token counts.
INDEX = ("drop", "kept", "src_len", "tgt_len")
# Keys of the data section that never change the ids: a new batch size reuses the corpus, and
# so does a new temperature (it weighs directions when an epoch is planned).
NOT_IN_KEY = ("batch_tokens", "batch_size", "shapes", "workers", "prepared_dir", "temperature")
# With directions, each kept pair's direction index, mapped like the lengths.
DIRECTION_INDEX = "dir"


def prepared_root(data: DataConfig) -> Path:
    if data.prepared_dir:
        return Path(data.prepared_dir)
    return cache_root() / "prepared"


def _file_sha1(path: Optional[str]) -> Optional[str]:
    if not path or not Path(path).is_file():
        return None  # a missing model is reported by the tokenizer, with its own message
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def corpus_key(cfg: Config, tokenizer: Optional[Tokenizer] = None) -> str:
    """The hash naming the prepared corpus of this config (any change to the ids changes it);
    `tokenizer`: given subword models (a fine-tuned run's parent's) instead of trained ones."""
    import sentencepiece

    from nmt.data import synthetic

    data = {k: v for k, v in asdict(cfg.data).items() if k not in NOT_IN_KEY}
    if data.pop("train_max_words"):  # a capped corpus has words.npy, which an uncapped lacks;
        data["word_counts"] = True  # uncapped: the key (and the corpus) of before the cap
    if not data["directions"]:  # one direction: the key (and the corpus) of before directions
        del data["directions"], data["tag"]
    if data.get("path"):  # a folder reached through a symlink is the same corpus
        data["path"] = str(Path(data["path"]).resolve())
    files = []
    for p in direction_files(cfg.data, "train"):
        if not p.is_file():
            raise NmtError(
                f"file not found: {p}"
                if not p.is_dir()
                else f"expected a file, found a directory: {p}"
            )
        st = p.stat()
        files.append([str(p.resolve()), st.st_size, st.st_mtime_ns])
    v = cfg.vocab
    key = {
        "format": FORMAT,
        "data": data,
        "vocab": asdict(v),
        "seed": cfg.train.seed,
        "files": files,
        "synthetic": synthetic.VERSION,
        "sentencepiece": sentencepiece.__version__,
        "models": [_file_sha1(m) for m in (v.model, v.src_model, v.tgt_model)],
        "given": None
        if tokenizer is None
        else [
            hashlib.sha1(b).hexdigest() if b else None
            for b in (tokenizer.src_proto, tokenizer.tgt_proto)
        ],
    }
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def ensure_prepared(
    cfg: Config, progress: bool = False, tokenizer: Optional[Tokenizer] = None
) -> tuple[Path, bool]:
    """The prepared corpus directory for `cfg`, built now if needed; (path, built now?)."""
    root = prepared_root(cfg.data)
    key = corpus_key(cfg, tokenizer)
    final = root / key
    if (final / "meta.json").is_file():
        return final, False
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / f".{key}.lock"):
        if (final / "meta.json").is_file():  # built by another process while we waited
            return final, False
        for stale in root.glob(f".tmp-{key}-*"):  # left by a killed prepare: the lock was free
            shutil.rmtree(stale, ignore_errors=True)
        tmp = root / f".tmp-{key}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            _build(cfg, tmp, progress, tokenizer)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final, True


# ----------------------------------------------------------------------------------------------
# Building


def _unwrap(e: BaseException) -> BaseException:
    """`datasets` wraps errors raised while it generates rows; the user's NmtError is inside."""
    seen = e
    while seen is not None:
        if isinstance(seen, NmtError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return e


def _stream_rows(data: DataConfig, progress: bool) -> Iterator[dict]:
    from tqdm import tqdm

    if data.directions:
        rows = ({"src": s, "tgt": t, "dir": k} for s, t, k in stream_directions(data, "train"))
    else:
        rows = ({"src": s, "tgt": t} for s, t in corpus.stream_split(data, "train"))
    yield from tqdm(rows, desc="reading", unit=" pairs", disable=not progress, mininterval=1.0)


def _read_train(cfg: Config, cache: Path, progress: bool):
    """The training split as a `datasets.Dataset` of text columns `src`, `tgt` (on disk)."""
    ds = corpus._datasets()
    if cfg.data.source == "hub":
        return corpus.hub_split(cfg.data, "train")
    columns = {"src": ds.Value("string"), "tgt": ds.Value("string")}
    if cfg.data.directions:
        columns["dir"] = ds.Value("int16")
    features = ds.Features(columns)
    try:
        return ds.Dataset.from_generator(
            _stream_rows,
            features=features,
            cache_dir=str(cache),
            gen_kwargs={"data": cfg.data, "progress": progress},
        )
    except Exception as e:  # noqa: BLE001 - re-raised, unwrapped when it is the user's mistake
        if isinstance(e, ValueError) and "corresponds to no data" in str(e):  # no row at all
            files = ", ".join(map(str, corpus.split_files(cfg.data, "train")))
            raise NmtError(f"the training split is empty: {files} hold no lines") from None
        raise _unwrap(e) from None


def _build(cfg: Config, out: Path, progress: bool, given: Optional[Tokenizer] = None) -> None:
    ds = corpus._datasets()
    times = {}
    t0 = time.perf_counter()
    text = _read_train(cfg, out / "read", progress)
    times["read"] = time.perf_counter() - t0
    log.info(f"prepare: read {len(text)} training pairs in {times['read']:.1f} s")

    t0 = time.perf_counter()
    tok = given or train_subwords(cfg, text)
    if given is not None:  # a fine-tuned run's parent: its model must have every tag already
        given.check_tags(cfg.data.target_languages(), "the subword model of train.init_from")
    # sentencepiece training freed about 23 bytes per character of its sample; give it back
    give_back_freed_memory()  # before the encode workers fork: they would count it again
    tok.save(out)
    times["subwords"] = time.perf_counter() - t0
    log.info(f"prepare: subword models trained in {times['subwords']:.1f} s")

    t0 = time.perf_counter()
    vocab = max(tok.src_vocab_size, tok.tgt_vocab_size)
    if progress:
        ds.enable_progress_bars()
    d = cfg.data
    ids = text.map(
        encode_rows,
        batched=True,
        num_proc=d.workers if d.workers > 1 else None,
        remove_columns=text.column_names,
        features=id_features(ds, vocab, bool(d.directions)),
        cache_file_name=str(out / "train.arrow"),
        load_from_cache_file=False,
        batch_size=WRITER_ROWS,
        writer_batch_size=WRITER_ROWS,  # one record batch
        # per map batch: the batch size sets the files' record batches
        desc="encoding",
        fn_kwargs={
            "src_proto": tok.src_proto,
            "tgt_proto": tok.tgt_proto,
            "lowercase": d.lowercase,
            "max_len": d.max_len,
            "max_ratio": d.max_ratio,
            "tags": [tok.tag_id(t) for _, t in d.language_pairs()] if d.directions else None,
            "tag_side": d.tag,
        },
    )
    ds.disable_progress_bars()
    times["encode+filter"] = time.perf_counter() - t0
    if d.train_max_words:
        save_words(out, text)
    del text
    shutil.rmtree(out / "read", ignore_errors=True)
    _write_meta(out, ids, times, vocab, d)


def _write_meta(out: Path, ids, times: dict, vocab: int, d: DataConfig) -> None:
    """The filter decisions and the kept pairs' rows and lengths as .npy files (every process
    maps them), and meta.json: the Arrow files, filter statistics, token counts and timings."""
    drop = ids.data.column("drop").to_numpy()
    kept = np.flatnonzero(drop == KEEP)
    index = {
        "drop": drop,
        "kept": kept.astype(np.int32) if len(drop) < 2**31 else kept,
        "src_len": ids.data.column("src_len").to_numpy()[kept],
        "tgt_len": ids.data.column("tgt_len").to_numpy()[kept],
    }
    for c in INDEX:
        np.save(out / f"{c}.npy", index[c])
    per_direction = {}
    if d.directions:
        direction = ids.data.column("dir").to_numpy()[kept]
        np.save(out / f"{DIRECTION_INDEX}.npy", direction)
        sizes = np.bincount(direction, minlength=len(d.directions))
        per_direction = dict(zip(d.directions, map(int, sizes)))
    counts = np.bincount(drop, minlength=4)
    src_tokens, tgt_tokens = int(index["src_len"].sum()), int(index["tgt_len"].sum())
    n = len(ids)
    del index, drop, kept
    files = sorted(p.name for p in out.glob("train*.arrow"))
    stats = FilterStats(n, *map(int, counts[:4]))  # kept, empty, too long, ratio: codes 0-3
    meta = {
        "format": FORMAT,
        "files": files,
        "stats": asdict(stats),
        "seconds": times,
        "src_tokens": src_tokens,
        "tgt_tokens": tgt_tokens,
        "vocab": vocab,
        "bytes": sum((out / f).stat().st_size for f in files),
        "workers": d.workers,
        "lowercase": d.lowercase,
        "subwords": sorted(p.name for p in out.glob(SUBWORD_GLOB)),
        "directions": per_direction,  # direction -> kept pairs ({} for one direction)
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    log.info(f"prepare: encoded and filtered in {times['encode+filter']:.1f} s; {stats.line()}")


# ----------------------------------------------------------------------------------------------
# Opening


@dataclass
class PreparedCorpus:
    path: Path
    meta: dict
    tokenizer: Tokenizer
    src: FileIdColumn  # every pair read, rows read from the files on demand
    tgt: FileIdColumn
    kept: np.ndarray  # rows kept by the filter, in corpus order (mapped .npy, as below)
    files: list[Path]  # the Arrow files the rows are read from
    src_len: np.ndarray  # tokens per kept pair (the source with its EOS)
    tgt_len: np.ndarray
    direction: Optional[np.ndarray] = None  # with directions: each kept pair's, an index
    max_words: int = 0  # data.train_max_words applied (0: none)
    over_words: int = 0  # kept pairs it dropped

    @property
    def stats(self) -> FilterStats:
        stats = FilterStats(**self.meta["stats"])
        return capped_stats(stats, self.max_words, self.over_words) if self.max_words else stats

    @property
    def directions(self) -> dict[str, int]:
        """Direction -> kept training pairs, in config order ({} for a one-direction corpus)."""
        return self.meta.get("directions", {})

    def direction_line(self) -> str:
        """The kept pairs of each direction, for the log ('' for one direction)."""
        shown = ", ".join(f"{k} {v}" for k, v in self.directions.items())
        return f"kept pairs per direction: {shown}" if shown else ""

    def batcher(
        self, data: DataConfig, seed: int, rank: int = 0, world: int = 1, pin: bool = False
    ) -> BucketBatcher:
        return BucketBatcher(
            self.src,
            self.tgt,
            data.batch_tokens,
            data.batch_size,
            seed,
            rank,
            world,
            rows=self.kept,
            pin=pin,
            lengths=(self.src_len, self.tgt_len),
            groups=self.direction,
            temperature=data.temperature,
            shapes=data.shapes,
        )

    def summary(self) -> str:
        m, sec = self.meta, self.meta["seconds"]
        total = sum(sec.values())
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in sec.items())
        return (
            f"prepared corpus: {self.path}\n{self.stats.line()}\n"
            f"tokens kept: source {m['src_tokens']}, target {m['tgt_tokens']} (ids as "
            f"{'uint16' if m['vocab'] <= 1 << 16 else 'int32'}); {m['bytes'] / 1e6:.1f} MB on "
            f"disk in {len(m['files'])} Arrow file(s)\n"
            f"prepare time: {stages}; {total:.1f} s in all, "
            f"{m['stats']['total'] / max(total, 1e-9):,.0f} pairs/s with {m['workers']} "
            f"worker(s)" + (f"\n{self.direction_line()}" if self.directions else "")
        )


def open_prepared(path: Path) -> PreparedCorpus:
    """Open a prepared corpus (nothing is read into memory but lengths and filter decisions).

    The Arrow files (`datasets`' cache format: IPC streams) are opened with pyarrow alone: a
    training rank then never imports `datasets` (60 MB of PSS per process)."""
    meta = json.loads((path / "meta.json").read_text())
    files = [path / f for f in meta["files"]]
    names = meta["subwords"]
    protos = [(path / n).read_bytes() for n in names]
    tok = Tokenizer(
        protos[0] if len(protos) == 1 else (path / SRC_SUBWORDS).read_bytes(),
        None if len(protos) == 1 else (path / TGT_SUBWORDS).read_bytes(),
        meta["lowercase"],
    )
    # Rows and lengths from their own contiguous files, not from the Arrow columns: those are
    # spread over every record batch, and reading them would fault in most of the corpus.
    index = {c: np.load(path / f"{c}.npy", mmap_mode="r") for c in INDEX}
    direction = path / f"{DIRECTION_INDEX}.npy"
    src, tgt = FileIdColumn.open(files, ("src", "tgt"))
    return PreparedCorpus(
        path,
        meta,
        tok,
        src,
        tgt,
        index["kept"],
        files,
        index["src_len"],
        index["tgt_len"],
        np.load(direction, mmap_mode="r") if direction.is_file() else None,
    )


def prepared_corpus(
    cfg: Config, progress: bool = False, tokenizer: Optional[Tokenizer] = None
) -> PreparedCorpus:
    """Prepare on first use (one code path), then map. `tokenizer`: encode with these subword
    models (a fine-tuned run reuses its parent's) instead of training new ones."""
    path, _ = ensure_prepared(cfg, progress, tokenizer)
    corpus_ = open_prepared(path)
    if cfg.data.train_max_words:
        corpus_ = within_words(corpus_, cfg.data.train_max_words)
    if not corpus_.kept.size:
        raise NmtError(
            f"the training set is empty after filtering ({corpus_.stats.line()}); "
            f"check 'data.max_len', 'data.max_ratio' and 'data.train_max_words'"
        )
    return corpus_
