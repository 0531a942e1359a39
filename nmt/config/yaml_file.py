"""Reading a YAML file as a mapping: safe (no tags run), every key once per mapping, and every
failure one line naming the file and line."""

from __future__ import annotations

from pathlib import Path

import yaml

from nmt.errors import NmtError


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping repeats a key."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's safe loader, refusing a key that a mapping repeats (yaml keeps the last one
    silently, so the first value a user wrote would be lost unseen)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`, merged by the loader
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: the safe loader's own error says so
                break
            if first is not key_node.start_mark:
                raise DuplicateKeyError(
                    None,
                    None,
                    f"duplicate key '{key}' (first at line {first.line + 1}; each key once "
                    f"per mapping)",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep)


def _safe_mapping(text: str):
    """What yaml.safe_load(text) gives, through the loader that refuses repeated keys."""
    loader = _UniqueKeyLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path, kind: str = "config") -> dict:
    """A YAML mapping from a file; every failure is one line naming the file (and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NmtError(f"{kind} file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise NmtError(f"{kind} file {path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise NmtError(f"cannot read {kind} file {path}: {e.strerror}") from None
    try:
        raw = _safe_mapping(text)
    except RecursionError:
        raise NmtError(f"{kind} file {path} nests too deeply to be a config") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if isinstance(e, DuplicateKeyError):
            raise NmtError(f"{problem} in {path}{at}") from None
        if isinstance(e, yaml.constructor.ConstructorError):  # e.g. !!python/object: never run
            raise NmtError(
                f"YAML tag not allowed in {path}{at}: {problem} ({kind} files are "
                f"plain YAML; nothing was run)"
            ) from None
        raise NmtError(f"YAML syntax error in {path}{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise NmtError(f"{kind} {path} must be a mapping of sections, got {type(raw).__name__}")
    return raw
