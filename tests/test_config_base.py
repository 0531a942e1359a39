"""Config inheritance (`base:`) and input paths relative to the config file that sets them."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import REPO
from nmt.config.load import load_config, merge_sections, path_keys
from nmt.data.corpus import load_split
from nmt.data.prepared import corpus_key
from nmt.errors import NmtError
from nmt.study import load_study, model_configs

PARENT = """data:
  source: local
  path: corpus
  src_lang: de
  tgt_lang: en
  splits: {train: train, valid: val}
model:
  arch: rnnsearch
  hidden_size: 64
  emb_size: 32
train:
  lr: 0.002
  max_steps: 10
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_child_keys_win_and_sections_merge_key_by_key(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = write(
        tmp_path / "child.yaml",
        "base: parent.yaml\nmodel: {hidden_size: 128}\ntrain: {lr: 0.001}\n",
    )
    cfg = load_config(child)
    assert (cfg.model.hidden_size, cfg.model.emb_size) == (128, 32)  # merged, child wins
    assert (cfg.train.lr, cfg.train.max_steps) == (0.001, 10)
    assert cfg.data.splits == {"train": "train", "valid": "val"}


def test_a_chain_of_bases_applies_grandparent_then_parent_then_child(tmp_path):
    write(tmp_path / "a" / "grand.yaml", PARENT)
    write(tmp_path / "b" / "parent.yaml", "base: ../a/grand.yaml\ntrain: {lr: 0.003}\n")
    child = write(tmp_path / "c" / "child.yaml", "base: ../b/parent.yaml\ntrain: {max_steps: 7}\n")
    cfg = load_config(child)
    assert (cfg.train.lr, cfg.train.max_steps, cfg.model.hidden_size) == (0.003, 7, 64)


def test_a_list_of_bases_merges_in_order(tmp_path):
    write(tmp_path / "p.yaml", PARENT)
    write(tmp_path / "fast.yaml", "train: {lr: 0.01, max_steps: 3}\n")
    write(tmp_path / "small.yaml", "train: {max_steps: 5}\nmodel: {hidden_size: 16}\n")
    cfg = load_config(write(tmp_path / "c.yaml", "base: [p.yaml, fast.yaml, small.yaml]\n"))
    assert (cfg.train.lr, cfg.train.max_steps, cfg.model.hidden_size) == (0.01, 5, 16)


def test_a_cycle_is_one_error_naming_the_file(tmp_path):
    write(tmp_path / "a.yaml", "base: b.yaml\n" + PARENT)
    write(tmp_path / "b.yaml", "base: a.yaml\n")
    with pytest.raises(
        NmtError,
        match=r"'base' in .*a\.yaml makes a cycle of config files: "
        r".*a\.yaml -> .*b\.yaml -> .*a\.yaml",
    ) as e:
        load_config(tmp_path / "a.yaml")
    assert "\n" not in str(e.value)
    write(tmp_path / "self.yaml", "base: self.yaml\n")
    with pytest.raises(NmtError, match="cycle"):
        load_config(tmp_path / "self.yaml")


def test_a_missing_base_is_one_error_naming_both_files(tmp_path):
    child = write(tmp_path / "child.yaml", "base: nowhere/parent.yaml\n" + PARENT)
    with pytest.raises(
        NmtError,
        match=r"base config file not found: .*nowhere/parent\.yaml "
        r"\(named by 'base' in .*child\.yaml\)",
    ):
        load_config(child)


@pytest.mark.parametrize("value", ["3", "{data: x}", "[a.yaml, 4]", "''"])
def test_base_must_be_a_path_or_a_list_of_paths(tmp_path, value):
    child = write(tmp_path / "child.yaml", f"base: {value}\n" + PARENT)
    with pytest.raises(
        NmtError,
        match=r"wrong type for 'base' in .*child\.yaml: expected a "
        r"config file path",
    ):
        load_config(child)


def test_relative_paths_resolve_against_the_folder_of_the_file_that_sets_them(
    tmp_path, monkeypatch
):
    write(
        tmp_path / "configs" / "base" / "parent.yaml", PARENT + "vocab: {model: spm/joint.model}\n"
    )
    write(
        tmp_path / "configs" / "child" / "child.yaml",
        "base: ../base/parent.yaml\ntrain: {init_from: ../../runs/parent}\n",
    )
    monkeypatch.chdir(tmp_path / "configs")  # the working directory plays no part
    cfg = load_config(Path("child") / "child.yaml")
    assert cfg.data.path == str(tmp_path / "configs" / "base" / "corpus")
    assert cfg.vocab.model == str(tmp_path / "configs" / "base" / "spm" / "joint.model")
    assert cfg.train.init_from == str(tmp_path / "runs" / "parent")
    # A child that sets the path itself resolves it against its own folder.
    write(
        tmp_path / "configs" / "child" / "own.yaml",
        "base: ../base/parent.yaml\ndata: {path: ../../data/here}\n",
    )
    assert load_config(Path("child") / "own.yaml").data.path == str(tmp_path / "data" / "here")


def test_absolute_paths_and_output_paths_are_kept(tmp_path):
    text = PARENT.replace("path: corpus", "path: /data/x") + "  run_dir: runs/x\n"
    cfg = load_config(write(tmp_path / "c.yaml", text))
    assert cfg.data.path == "/data/x" and cfg.train.run_dir == "runs/x"
    assert ("train", "run_dir") not in path_keys() and ("data", "path") in path_keys()


def test_set_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    write(tmp_path / "configs" / "c.yaml", PARENT)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(tmp_path / "configs" / "c.yaml", ["data.path=local/corpus"])
    assert os.path.abspath(cfg.data.path) == str(tmp_path / "local" / "corpus")


def test_a_stored_config_keeps_its_paths_as_written(tmp_path):
    stored = write(tmp_path / "run" / "config.yaml", PARENT)
    assert load_config(stored, stored=True).data.path == "corpus"


def test_merge_sections_copies_and_replaces_non_mappings():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    out = merge_sections(base, {"a": {"c": [3]}, "e": {"f": 2}})
    assert out == {"a": {"b": 1, "c": [3]}, "d": 1, "e": {"f": 2}}
    out["a"]["b"] = 9
    assert base["a"]["b"] == 1


def test_a_local_multi30k_twin_differs_from_its_recipe_only_in_where_the_data_and_run_live():
    hubs = [
        p
        for p in (REPO / "configs" / "multi30k").rglob("*.yaml")
        if "_local" not in p.name and not p.name.startswith("corpus")
    ]
    assert len(hubs) >= 8  # the old three and the recipes in de-en/ and en-de/
    for path in hubs:
        hub = load_config(path)
        local = load_config(path.with_name(f"{path.stem}_local.yaml"))
        # compared resolved: ../shared may be a symlink, which load_config keeps as written
        shared = REPO.parent / "shared" / "data" / "multi30k"
        assert Path(local.data.path).resolve() == shared.resolve()
        where = dict(source="local", hub_name=None, path=local.data.path, format="text")
        assert replace(hub.data, **where, splits=local.data.splits) == local.data, path
        train = replace(hub.train, run_dir=local.train.run_dir)
        assert replace(hub, data=local.data, train=train) == local, path


def test_the_en_de_recipes_read_the_de_en_corpus_reversed():
    for arch in ("transformer", "rnnsearch"):
        for twin in ("", "_local"):
            de_en = load_config(REPO / "configs" / "multi30k" / "de-en" / f"{arch}{twin}.yaml")
            en_de = load_config(REPO / "configs" / "multi30k" / "en-de" / f"{arch}{twin}.yaml")
            assert (en_de.data.src_lang, en_de.data.tgt_lang) == ("en", "de")
            assert (en_de.data.source, en_de.data.path) == (de_en.data.source, de_en.data.path)
            assert en_de.vocab == de_en.vocab
            assert en_de.train.max_steps >= de_en.train.max_steps  # into German may train longer
    rnnsearch = "configs/multi30k/{}/rnnsearch.yaml"
    assert (
        load_config(REPO / rnnsearch.format("en-de")).model
        == load_config(REPO / rnnsearch.format("de-en")).model
    )


def test_a_symlinked_shared_folder_reads_and_keys_the_same_corpus(tmp_path):
    """A clone whose ../shared is a symlink: the local config's path leads to the same files and
    names the same prepared corpus as the real folder does."""
    real = tmp_path / "disk" / "data" / "multi30k"
    for split in ("train", "val", "test_2016_flickr"):
        write(real / f"{split}.de", "ein Hund .\nzwei Katzen .\n")
        write(real / f"{split}.en", "a dog .\ntwo cats .\n")
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "configs" / "multi30k", clone / "repo" / "configs" / "multi30k")
    (clone / "shared").symlink_to(tmp_path / "disk", target_is_directory=True)
    cfg = load_config(clone / "repo" / "configs" / "multi30k" / "rnnsearch_local.yaml")
    assert Path(cfg.data.path).resolve() == real.resolve()
    assert load_split(cfg.data, "valid") == (
        ["ein Hund .", "zwei Katzen ."],
        ["a dog .", "two cats ."],
    )
    direct = replace(cfg, data=replace(cfg.data, path=str(real)))
    assert corpus_key(cfg) == corpus_key(direct)


def test_study_files_keep_their_own_base_mapping_and_working_directory_paths(monkeypatch):
    monkeypatch.chdir(REPO)
    path = REPO / "configs" / "study" / "multi30k.yaml"
    configs = model_configs(load_study(path), str(path), Path("/tmp/study"))
    # ../shared from the working directory, stored absolute so the configs work from anywhere
    assert {c.data.path for c in configs.values()} == {str(REPO.parent / "shared/data/multi30k")}
