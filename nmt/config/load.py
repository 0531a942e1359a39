"""Loading a config: YAML files over their `base:` files, dotted `--set` overrides, validation.

This module sits ABOVE the models: a `model:` section is checked against the keys of the
architecture it names, which the model registry knows. The registry is asked lazily, when a
model section is checked, so reading and merging config files stays torch-free. Unknown keys,
wrong types and out-of-range values fail before any work starts with one line naming the key,
the file and what was expected.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib.util
import os
import pkgutil
import re
from pathlib import Path
from typing import Any

import yaml

from nmt.config.fields import check_range, coerce, hints
from nmt.config.schema import REQUIRED, Config, DecodeConfig, ModelConfig, SyntheticConfig
from nmt.config.yaml_file import read_yaml
from nmt.errors import NmtError

# Before per-architecture configs (checkpoint format 1), every stored model section held the keys
# of all architectures; a stored config drops the ones its architecture does not have.
LEGACY_MODEL_KEYS = frozenset(
    "rnn_type emb_size hidden_size enc_hidden_size reverse_source feed_context attention "
    "attention_size deep_output d_model heads ff attention_dropout norm positions max_positions "
    "tie_embeddings tie_output".split()
)


def model_classes(arch: str | None = None) -> dict[str, type]:
    """Architecture name -> its config dataclass. The shipped architectures' come from their
    torch-free `nmt/models/*_config.py` modules, so checking a config never imports torch; an
    architecture written as one file (its config beside its model) is found through the
    registry, which imports the models, only when `arch` names none of those."""
    models = importlib.util.find_spec("nmt.models").submodule_search_locations
    classes: dict[str, type] = {}
    for module in pkgutil.iter_modules(models):
        if module.name.endswith("_config"):
            classes.update(importlib.import_module(f"nmt.models.{module.name}").CONFIGS)
    for name, cls in classes.items():
        cls.arch_name = name  # names the architecture in config errors
    if arch is not None and arch not in classes:
        from nmt.models.registry import config_classes  # lazy: models import torch

        classes.update(config_classes())
    return classes


def _model_class(raw: Any, where: str) -> type:
    """The config dataclass of the architecture a raw `model:` mapping names."""
    if not isinstance(raw, dict):
        return ModelConfig  # _build reports the section's type
    arch = raw.get("arch")
    if "arch" not in raw:  # before any key it would call unknown
        raise NmtError(f"missing required key 'model.arch' in {where}")
    if not isinstance(arch, str):
        raise NmtError(f"wrong type for 'model.arch' in {where}: expected str, got {arch!r}")
    classes = model_classes(arch)
    if arch not in classes:
        close = difflib.get_close_matches(arch, classes, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise NmtError(
            f"unknown architecture 'model.arch: {arch}' in {where}{hint} "
            f"(registered: {', '.join(sorted(classes))})"
        )
    return classes[arch]


def _variants(tp: type) -> list[type]:
    """The dataclasses a section may be: every architecture's for `model`, else just `tp`."""
    return [tp, *model_classes().values()] if tp is ModelConfig else [tp]


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys: dict[str, None] = {}
    for f in dataclasses.fields(cls):
        tp = hints(cls)[f.name]
        keys[prefix + f.name] = None
        if dataclasses.is_dataclass(tp):
            for variant in _variants(tp):
                keys.update(dict.fromkeys(_all_keys(variant, prefix + f.name + ".")))
    return list(keys)


def _unknown(key: str, where: str, cls: type = None, prefix: str = "") -> NmtError:  # type: ignore[assignment]
    """An unknown key, with the closest key of its own section (or of the whole config)."""
    own = [prefix + f.name for f in dataclasses.fields(cls)] if cls else _all_keys(Config)
    arch = getattr(cls, "arch_name", None) if cls is not None else None
    if arch is None:
        close = difflib.get_close_matches(key, own, n=1, cutoff=0.6)
        return NmtError(
            f"unknown key '{key}' in {where}" + (f"; did you mean '{close[0]}'?" if close else "")
        )

    def owners(name: str) -> list[str]:
        return [
            n for n, c in model_classes().items() if name in {f.name for f in dataclasses.fields(c)}
        ]

    if owners(key.removeprefix(prefix)):
        return NmtError(
            f"unknown key '{key}' in {where}: the '{arch}' architecture has no "
            f"such key (it belongs to {', '.join(owners(key.removeprefix(prefix)))})"
        )
    # A misspelt key: suggest the closest key of any architecture, saying whose it is.
    pool = list(
        dict.fromkeys(
            own + [prefix + f.name for c in model_classes().values() for f in dataclasses.fields(c)]
        )
    )
    close = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    if not close:
        return NmtError(f"unknown key '{key}' in {where}")
    hint = f"; did you mean '{close[0]}'?"
    if close[0] not in own:
        hint += (
            f" (a key of {', '.join(owners(close[0].removeprefix(prefix)))}, not of the "
            f"'{arch}' architecture)"
        )
    return NmtError(f"unknown key '{key}' in {where}{hint}")


def _build(cls: type, raw: Any, prefix: str, where: str, stored: bool = False) -> Any:
    if not isinstance(raw, dict):
        name = prefix.rstrip(".") or "the top level"
        raise NmtError(f"wrong type for '{name}' in {where}: expected a mapping, got {raw!r}")
    if cls is ModelConfig:
        cls = _model_class(raw, where)
    types = hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if stored and issubclass(cls, ModelConfig):
        raw = {k: v for k, v in raw.items() if k in fields or k not in LEGACY_MODEL_KEYS}
    for k in raw:
        if k not in fields:
            raise _unknown(prefix + str(k), where, cls, prefix)
    kwargs = {}
    for name, f in fields.items():
        key = prefix + name
        tp = types[name]
        if name not in raw:
            if f.default is REQUIRED and f.default_factory is REQUIRED:  # type: ignore[misc]
                raise NmtError(f"missing required key '{key}' in {where}")
            continue
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(
                tp, raw[name] if raw[name] is not None else {}, key + ".", where, stored
            )
        else:
            kwargs[name] = coerce(raw[name], tp, key, where)
            check_range(f, kwargs[name], key, where)
    return cls(**kwargs)


# ----------------------------------------------------------------------------------------------
# Inheritance (`base:`) and paths relative to the config file


def merge_sections(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`: mappings merge key by key (recursively), anything
    else in `over` replaces what `base` holds."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        both = isinstance(v, dict) and isinstance(out.get(k), dict)
        out[k] = merge_sections(out[k], v) if both else copy.deepcopy(v)
    return out


def path_keys() -> list[tuple[str, str]]:
    """(section, key) of every input path a config file may set relative to its own folder."""
    return [
        (s.name, f.name)
        for s in dataclasses.fields(Config)
        for f in dataclasses.fields(hints(Config)[s.name])
        if f.metadata.get("path")
    ]


def _is_relative(value: Any) -> bool:
    """Whether a path key's value is a relative path (~ counts as absolute)."""
    return isinstance(value, str) and bool(value) and not os.path.isabs(os.path.expanduser(value))


def _resolve_paths(raw: dict, folder: Path) -> None:
    """Make the file's relative input paths absolute against `folder` (in place)."""
    for section, key in path_keys():
        node = raw.get(section)
        value = node.get(key) if isinstance(node, dict) else None
        if _is_relative(value):
            node[key] = os.path.abspath(folder / value)


def with_absolute_paths(cfg: Config) -> Config:
    """`cfg` with its relative input paths made absolute against the working directory, where
    a `--set` value, a study file's paths and a run's stored config have them: the same files
    then compare equal however they were written, and a stored config works from anywhere."""
    sections = {}
    for section, key in path_keys():
        node = sections.get(section, getattr(cfg, section))
        value = getattr(node, key)
        if _is_relative(value):
            sections[section] = dataclasses.replace(node, **{key: os.path.abspath(value)})
    return dataclasses.replace(cfg, **sections) if sections else cfg


def _bases(raw: dict, path: Path) -> list[str]:
    bases = raw.pop("base", [])
    bases = [bases] if isinstance(bases, str) else bases
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        raise NmtError(
            f"wrong type for 'base' in {path}: expected a config file path (relative "
            f"to {path}'s folder) or a list of them, got {raw.get('base', bases)!r}"
        )
    return bases


def read_config_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict:
    """The raw mapping of a config file over its `base` files: parents first (in the order
    listed), the file's own keys win, mappings merge recursively, and a parent may have bases
    of its own. Each file's relative input paths resolve against that file's folder."""
    path = Path(path)
    if path.resolve() in _chain:
        names = " -> ".join(str(p) for p in (*_chain, path.resolve()))
        raise NmtError(f"'base' in {path} makes a cycle of config files: {names}")
    raw = read_yaml(path)
    bases = _bases(raw, path)
    _resolve_paths(raw, path.parent)
    merged: dict = {}
    for base in bases:
        parent = path.parent / base
        if not parent.is_file():
            raise NmtError(f"base config file not found: {parent} (named by 'base' in {path})")
        merged = merge_sections(merged, read_config_file(parent, (*_chain, path.resolve())))
    return merge_sections(merged, raw)


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `a.b.c=value` overrides (values parsed as YAML) to a raw config mapping."""
    valid = set(_all_keys(Config))
    for item in overrides:
        if "=" not in item:
            raise NmtError(f"--set expects KEY=VALUE, got {item!r}")
        key, text = item.split("=", 1)
        key = key.strip()
        if key not in valid:
            raise _unknown(key, "--set")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            raise NmtError(f"--set {key}: cannot parse value {text!r}") from None
        node = raw
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
    return raw


def validate(cfg: Config, where: str) -> Config:
    """Cross-field checks that a single field's type and range cannot express."""
    d, v, m = cfg.data, cfg.vocab, cfg.model
    if d.source == "hub" and not d.hub_name:
        raise NmtError(f"missing required key 'data.hub_name' in {where} (data.source is hub)")
    if d.source == "local" and not d.path:
        raise NmtError(f"missing required key 'data.path' in {where} (data.source is local)")
    if "train" not in d.splits:
        raise NmtError(f"'data.splits' in {where} must name a 'train' split")
    check_directions(cfg, where)
    m.check(cfg, where)  # the architecture's own cross-field checks
    if cfg.decode.nbest > cfg.decode.beam and not cfg.decode.sample:
        raise NmtError(
            f"'decode.nbest' ({cfg.decode.nbest}) in {where} must be <= "
            f"'decode.beam' ({cfg.decode.beam})"
        )
    if v.model and not v.joint:
        raise NmtError(
            f"'vocab.model' in {where} is a joint model; with 'vocab.joint: false' use "
            f"'vocab.src_model' and 'vocab.tgt_model'"
        )
    if d.synthetic.min_words > d.synthetic.max_words:
        raise NmtError(f"'data.synthetic.min_words' exceeds 'data.synthetic.max_words' in {where}")
    bk = cfg.eval.buckets
    if any(a >= b for a, b in zip(bk, bk[1:])) or any(b < 1 for b in bk):
        raise NmtError(
            f"'eval.buckets' in {where} must be strictly increasing positive word counts, got {bk}"
        )
    if cfg.train.average_last > cfg.train.keep_last:
        raise NmtError(
            f"'train.average_last' ({cfg.train.average_last}) in {where} must be <= "
            f"'train.keep_last' ({cfg.train.keep_last}): older checkpoints are deleted"
        )
    if len(cfg.train.betas) != 2:
        raise NmtError(f"'train.betas' in {where} must hold two numbers")
    return cfg


# A language key in a direction: what a file suffix and a tag <2xx> can hold, no '-'.
LANGUAGE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def check_directions(cfg: Config, where: str) -> None:
    """`data.directions`: 'xx-yy' entries, each once, xx != yy, over local text files and one
    joint subword model (the tags are its pieces)."""
    d = cfg.data
    seen: set[str] = set()
    for entry in d.directions:
        src, _, tgt = entry.partition("-")
        if not (LANGUAGE.fullmatch(src) and LANGUAGE.fullmatch(tgt)):
            raise NmtError(
                f"'data.directions' in {where}: entry {entry!r} is not of the form 'xx-yy' "
                f"(two language keys of letters, digits or '_' joined by '-', e.g. de-en)"
            )
        if src == tgt:
            raise NmtError(
                f"'data.directions' in {where}: entry {entry!r} translates a language into itself"
            )
        if entry in seen:
            raise NmtError(f"'data.directions' in {where}: entry {entry!r} is listed twice")
        seen.add(entry)
    if not d.directions:
        return
    if not cfg.vocab.joint:
        raise NmtError(
            f"'data.directions' in {where} needs 'vocab.joint: true': the language tags are "
            f"pieces of one subword model shared by every language"
        )
    if d.source == "synthetic":
        known = SyntheticConfig.LANGUAGES
        for lang in dict.fromkeys(x for pair in d.language_pairs() for x in pair):
            if lang not in known:
                raise NmtError(
                    f"'data.directions' in {where}: the synthetic corpus has no language "
                    f"'{lang}' (its languages: {', '.join(known)}; e.g. [src-tgt, alt-tgt])"
                )
    elif d.source != "local" or d.format != "text":
        raise NmtError(
            f"'data.directions' in {where} reads local text files (data.source: local, "
            f"data.format: text) or the synthetic corpus; "
            f"{d.source if d.source != 'local' else d.format} corpora hold one direction for now"
        )


def check_trainable(cfg: Config, where: str) -> None:
    """Checks that matter only for training (a stored run's config is never refused by them)."""
    if "valid" not in cfg.data.splits and (cfg.train.patience or cfg.train.schedule == "plateau"):
        key = "train.patience" if cfg.train.patience else "train.schedule: plateau"
        raise NmtError(f"'{key}' in {where} needs a validation split: add 'valid' to 'data.splits'")
    t = cfg.train
    if t.schedule == "cosine" and t.max_steps <= t.warmup_steps:
        raise NmtError(
            f"'train.schedule: cosine' in {where} decays to train.min_lr at train.max_steps: "
            f"set train.max_steps above train.warmup_steps ({t.warmup_steps}), got {t.max_steps}"
        )


def model_config(arch: str, where: str = "the model config", **values: Any) -> ModelConfig:
    """An architecture's config dataclass from keyword values, checked like a `model:` section
    (for code and tests that build models without a config file)."""
    return _build(ModelConfig, {"arch": arch, **values}, "model.", where)


def with_decode_options(cfg: Config, options: dict, where: str = "the command line") -> Config:
    """cfg with `decode.KEY: value` options checked as if they stood in the config file."""
    raw = {**dataclasses.asdict(cfg.decode), **options}
    cfg.decode = _build(DecodeConfig, raw, "decode.", where)
    return validate(cfg, where)


def from_dict(raw: dict, where: str, stored: bool = False) -> Config:
    """Validated dataclasses from a raw mapping. `stored`: a config written by an earlier nmt
    (a checkpoint's or a run's), whose model section may hold other architectures' keys."""
    return validate(_build(Config, raw, "", where, stored), where)


def load_config(
    path: str | Path, overrides: list[str] | None = None, stored: bool = False
) -> Config:
    """Load a YAML config (over its `base` files), apply dotted overrides, and return the
    validated dataclasses. A `stored` config (a run's RUN/config.yaml) is read as written: its
    paths were resolved when the run was made."""
    path = Path(path)
    raw = apply_overrides(read_yaml(path) if stored else read_config_file(path), overrides or [])
    where = str(path) + (" (with --set overrides)" if overrides else "")
    return from_dict(raw, where, stored)


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=None)
