"""The prepared corpus: encoded once, memory-mapped, keyed by what changes the ids, built
atomically; its batches cover every kept pair once per epoch, the same way run after run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import REPO, make_config, tiny_pairs
from nmt.checkpoint import load_checkpoint, step_checkpoints
from nmt.config.load import dump_yaml
from nmt.data import prepared
from nmt.data.prepared import corpus_key, ensure_prepared, open_prepared, prepared_corpus
from nmt.data.subword_sample import sample_rows
from nmt.errors import NmtError
from nmt.jobs import train as train_job


def repo_first() -> str:
    """PYTHONPATH for a child `python -m nmt`: this tree first, the caller's own entries kept
    (where the dependencies live outside site-packages, as on a GPU lease's --target install)."""
    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def write_corpus(d: Path, pairs: list[tuple[str, str]], split: str = "train") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs), "utf-8")
    (d / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), "utf-8")
    return d


def config(d: Path, root: Path, data: dict | None = None, vocab: dict | None = None, **sections):
    return make_config(
        data={
            "source": "local",
            "path": str(d),
            "src_lang": "de",
            "tgt_lang": "en",
            "prepared_dir": str(root),
            "batch_tokens": 300,
            **(data or {}),
        },
        vocab={"type": "word", "size": 100, **(vocab or {})},
        **sections,
    )


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    pairs = tiny_pairs(400, seed=3) + [("", "leer"), (" ".join(["dog"] * 30), "x")]
    return write_corpus(tmp_path / "corpus", pairs)


def test_every_kept_pair_is_in_exactly_one_batch_per_epoch(corpus_dir, tmp_path):
    corpus = prepared_corpus(config(corpus_dir, tmp_path / "p", {"max_len": 20}))
    assert (corpus.stats.total, corpus.stats.kept, corpus.stats.empty, corpus.stats.too_long) == (
        402,
        400,
        1,
        1,
    )
    # the batcher plans from the kept rows and lengths stored apart (contiguous .npy files,
    # mapped, not copied), which are the id columns' own lengths
    assert np.array_equal(corpus.src_len, corpus.src.lengths()[corpus.kept])
    assert np.array_equal(corpus.tgt_len, corpus.tgt.lengths()[corpus.kept])
    batcher = corpus.batcher(config(corpus_dir, tmp_path / "p").data, seed=4)
    for used, mapped in zip(
        (batcher.src_len, batcher.tgt_len, batcher.rows),
        (corpus.src_len, corpus.tgt_len, corpus.kept),
    ):
        assert isinstance(mapped, np.memmap) and np.shares_memory(used, mapped)
    for epoch in range(3):
        seen = np.concatenate(batcher.epoch(epoch))
        assert sorted(corpus.kept[seen].tolist()) == list(range(400))  # rows 400, 401 dropped


PLAN = """
import hashlib, sys
from nmt.config.load import load_config
from nmt.data.prepared import prepared_corpus
cfg = load_config(sys.argv[1])
b = prepared_corpus(cfg).batcher(cfg.data, cfg.train.seed)
h = hashlib.sha1()
for epoch in (0, 1):
    for ix in b.epoch(epoch):
        h.update(ix.tobytes()); h.update(b.batch(ix).tgt_out.numpy().tobytes())
print(h.hexdigest())
"""


def test_the_same_batches_run_after_run(corpus_dir, tmp_path):
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text(dump_yaml(config(corpus_dir, tmp_path / "p")))
    env = {**os.environ, "PYTHONPATH": repo_first(), "PYTHONHASHSEED": "random"}
    here = subprocess.run(
        [sys.executable, "-c", PLAN, str(cfg_file)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()  # prepares
    again = subprocess.run(
        [sys.executable, "-c", PLAN, str(cfg_file)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()  # maps
    assert len(here) == 40 and here == again


def test_resume_mid_epoch_from_the_prepared_corpus_is_bit_exact(corpus_dir, tmp_path, monkeypatch):
    def cfg(name: str, steps: int):
        return config(
            corpus_dir,
            tmp_path / "p",
            {"splits": {"train": "train"}},
            model={
                "arch": "transformer",
                "d_model": 16,
                "heads": 2,
                "ff": 32,
                "layers": 1,
                "dropout": 0.1,
            },
            train={
                "run_dir": str(tmp_path / name),
                "max_steps": steps,
                "threads": 1,
                "valid_every": 1000,
                "log_every": 100,
            },
        )

    whole = train_job.train(cfg("a", 12)).run
    part = train_job.train(cfg("b", 5)).run
    progress = load_checkpoint(step_checkpoints(part)[-1])["progress"]
    assert progress["epoch"] == 0 and progress["batch_in_epoch"] == 5  # mid-epoch

    def encode_again(*a, **k):
        raise AssertionError("the resumed run encoded the corpus again")

    monkeypatch.setattr(prepared, "_build", encode_again)
    train_job.train(cfg("b", 12), resume=True)
    a, b = (load_checkpoint(step_checkpoints(r)[-1])["model"] for r in (whole, part))
    assert all(torch.equal(a[k], b[k]) for k in a)


def kill_midway(cfg_file: Path, root: Path) -> None:
    """Start `nmt prepare` and SIGKILL it once it is encoding (its subword model is written)."""
    env = {**os.environ, "PYTHONPATH": repo_first()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "prepare", str(cfg_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not list(root.glob(".tmp-*/spm.model")):
        assert proc.poll() is None and time.time() < deadline, "prepare ended before the kill"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_prepare_killed_midway_is_redone_cleanly(tmp_path):
    d = write_corpus(tmp_path / "corpus", tiny_pairs(30000, seed=1))
    root = tmp_path / "p"
    cfg = config(d, root)
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text(dump_yaml(cfg))
    kill_midway(cfg_file, root)
    assert not (root / corpus_key(cfg)).exists()  # nothing a later run could take as complete
    assert list(root.glob(".tmp-*"))  # the killed one's partial files

    path, built = ensure_prepared(cfg)
    assert built and not list(root.glob(".tmp-*"))
    fresh, _ = ensure_prepared(config(d, tmp_path / "fresh"))
    a, b = open_prepared(path), open_prepared(fresh)
    assert a.stats == b.stats and a.tokenizer.src_proto == b.tokenizer.src_proto
    rows = np.arange(0, 30000, 997)
    assert all(np.array_equal(x, y) for x, y in zip(a.src.rows(rows), b.src.rows(rows)))
    assert all(np.array_equal(x, y) for x, y in zip(a.tgt.rows(rows), b.tgt.rows(rows)))


@pytest.mark.parametrize(
    "change",
    [
        {"data": {"max_len": 7}},
        {"data": {"max_ratio": 1.5}},
        {"data": {"lowercase": True}},
        {"data": {"src_lang": "en", "tgt_lang": "de"}},
        {"vocab": {"size": 60}},
        {"vocab": {"type": "unigram"}},
        {"vocab": {"joint": False}},
        {"vocab": {"max_sentences": 150}},
        {"train": {"seed": 9}},
    ],
)
def test_a_changed_data_or_vocab_section_never_reuses_a_stale_corpus(corpus_dir, tmp_path, change):
    root = tmp_path / "p"
    base = config(corpus_dir, root)
    path, _ = ensure_prepared(base)
    changed = config(
        corpus_dir,
        root,
        change.get("data"),
        change.get("vocab"),
        **({"train": change["train"]} if "train" in change else {}),
    )
    other, built = ensure_prepared(changed)
    assert built and other != path
    if "max_len" in change.get("data", {}):
        assert open_prepared(other).stats.kept < open_prepared(path).stats.kept


def test_edited_corpus_files_are_prepared_again_batch_settings_are_not(corpus_dir, tmp_path):
    root = tmp_path / "p"
    path, _ = ensure_prepared(config(corpus_dir, root))
    assert ensure_prepared(
        config(corpus_dir, root, {"batch_tokens": 999, "batch_size": 8, "workers": 2})
    ) == (path, False)
    write_corpus(corpus_dir, tiny_pairs(300, seed=8))
    other, built = ensure_prepared(config(corpus_dir, root))
    assert built and other != path and open_prepared(other).stats.total == 300


def mapped_files() -> set[str]:
    return {
        line.split()[-1]
        for line in Path("/proc/self/maps").read_text().splitlines()
        if line.endswith(".arrow")
    }


def test_two_ranks_read_one_copy_and_only_rank_0_encodes(corpus_dir, tmp_path, monkeypatch):
    cfg = config(corpus_dir, tmp_path / "p")
    rank0 = train_job._training_corpus(cfg, rank=0, ckpt_tok=None)

    def encode_again(*a, **k):
        raise AssertionError("rank 1 encoded the corpus again")

    monkeypatch.setattr(prepared, "_build", encode_again)
    rank1 = train_job._training_corpus(cfg, rank=1, ckpt_tok=None)
    assert rank0.files == rank1.files
    assert [os.stat(f).st_ino for f in rank0.files] == [os.stat(f).st_ino for f in rank1.files]


def mapped_kb(names: set[str]) -> int:
    """Resident KB of this process's mappings of these files (/proc/self/smaps)."""
    kb, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):  # a mapping's first line
            inside = len(head) >= 6 and head[-1] in names
        elif inside and head[0] == "Rss:":
            kb += int(head[1])
    return kb


def test_rows_read_for_batches_leave_no_page_of_the_corpus_mapped(corpus_dir, tmp_path):
    """Rows are read with pread from the page cache: a rank's RSS does not grow towards the
    corpus's size as an epoch of random rows goes by (274 MB more on 2M pairs than on 100k when
    the rows were read through a memory map)."""
    cfg = config(corpus_dir, tmp_path / "p")
    corpus = prepared_corpus(cfg)
    batcher = corpus.batcher(cfg.data, seed=4)
    names = {str(f) for f in corpus.files}
    for ix in batcher.epoch(0):
        batcher.batch(ix)
    assert names and mapped_kb(names) == 0
    assert not names & mapped_files()  # nothing of them mapped at all, not even the metadata


def test_rows_read_from_the_files_are_the_arrow_columns_rows(corpus_dir, tmp_path, monkeypatch):
    import pyarrow as pa

    monkeypatch.setattr(prepared, "WRITER_ROWS", 64)  # several record batches in the file
    corpus = prepared_corpus(config(corpus_dir, tmp_path / "p"))
    tables = [pa.ipc.open_stream(pa.OSFile(str(f))).read_all() for f in corpus.files]
    assert sum(t.column("src").num_chunks for t in tables) > 3
    want = {c: [r for t in tables for r in t.column(c).to_pylist()] for c in ("src", "tgt")}
    rows = np.random.default_rng(0).permutation(len(want["src"]))[:150]
    for c, column in (("src", corpus.src), ("tgt", corpus.tgt)):
        assert [r.tolist() for r in column.rows(rows)] == [want[c][r] for r in rows]
        assert column.lengths().tolist() == [len(r) for r in want[c]]


MAP_ONLY = """
import sys
from nmt.config.load import load_config
from nmt.data.prepared import prepared_corpus
corpus = prepared_corpus(load_config(sys.argv[1]))
batcher = corpus.batcher(load_config(sys.argv[1]).data, 1)
batcher.batch(batcher.epoch(0)[0])
print(len(corpus.kept), "datasets" in sys.modules, "pandas" in sys.modules)
"""


def test_a_rank_that_maps_a_prepared_corpus_imports_neither_datasets_nor_pandas(
    corpus_dir, tmp_path
):
    # What a second torchrun rank does: it maps the files rank 0 prepared. `datasets` (60 MB of
    # PSS per process) is for reading and preparing corpora, not for mapping them, and pandas
    # (32 MB) came in through pyarrow's to_numpy.
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text(dump_yaml(config(corpus_dir, tmp_path / "p")))
    kept = prepared_corpus(config(corpus_dir, tmp_path / "p")).stats.kept  # rank 0's prepare
    out = subprocess.run(
        [sys.executable, "-c", MAP_ONLY, str(cfg_file)],
        env={**os.environ, "PYTHONPATH": repo_first()},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert out == [str(kept), "False", "False"]


def test_streamed_training_split_errors_name_the_file_and_line(tmp_path):
    d = tmp_path / "corpus"
    write_corpus(d, tiny_pairs(5))
    (d / "train.en").write_bytes(b"one\ntwo\nthr\xe9e\nfour\nfive\n")
    with pytest.raises(NmtError) as e:
        prepared_corpus(config(d, tmp_path / "p"))
    assert str(e.value) == (f"{d / 'train.en'}, line 3: not valid UTF-8 (byte 0xe9 at column 4)")

    (d / "train.en").write_text("one\ntwo\n")
    with pytest.raises(NmtError) as e:
        prepared_corpus(config(d, tmp_path / "p"))
    assert str(e.value) == (
        f"line counts differ: {d / 'train.de'} has 5 lines, {d / 'train.en'} has 2"
    )
    assert not list((tmp_path / "p").glob("*/meta.json"))  # nothing prepared from bad data


def test_subwords_train_on_the_seeded_sample_only(corpus_dir, tmp_path, monkeypatch):
    """Only the sampled pairs reach sentencepiece (not every line of the corpus), the same pairs on
    every run for the same seed, other pairs for another seed."""
    seen = []
    build = prepared.Tokenizer.build

    def spy(cfg, src, tgt, lowercase, seed):
        seen.append((list(src), list(tgt)))
        return build(cfg, src, tgt, lowercase, seed)

    monkeypatch.setattr(prepared.Tokenizer, "build", spy)
    lines = (corpus_dir / "train.de").read_text("utf-8").splitlines()
    for root, seed in (("a", 1), ("b", 1), ("c", 2)):
        ensure_prepared(
            config(corpus_dir, tmp_path / root, vocab={"max_sentences": 101}, train={"seed": seed})
        )
    (a_src, a_tgt), (b_src, _), (c_src, _) = seen
    rows = sample_rows(len(lines), 101, True, 1)
    assert len(a_src) == len(a_tgt) == len(rows) == 51  # joint: half of the lines per side
    assert a_src == [lines[r] for r in rows] and a_src == b_src and c_src != a_src
    assert sample_rows(len(lines), 10**6, True, 1) is None  # all fit: every pair
    assert np.array_equal(sample_rows(10**6, 300000, True, 1), sample_rows(10**6, 300000, True, 1))


def test_the_default_subword_sample_is_200k_lines_the_same_on_every_run():
    """The default sample bounds subword training's memory (unigram: about 23 bytes per character,
    0.75 GB for 200k lines of 160 characters) whatever the corpus size, and is seeded."""
    from nmt.config import VocabConfig

    assert VocabConfig().max_sentences == 200000
    a = sample_rows(2_000_000, VocabConfig().max_sentences, True, 1)
    assert len(a) == 100000 and np.all(np.diff(a) > 0)  # joint: 100k pairs, both sides
    assert np.array_equal(a, sample_rows(2_000_000, 200000, True, 1))
    assert len(sample_rows(2_000_000, 200000, False, 1)) == 200000  # per side
