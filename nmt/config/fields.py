"""Field values checked against their annotations and `opt` bounds, with one-line errors."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any, Literal, Union

from nmt.errors import NmtError

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def yaml_word(value: Any) -> str:
    """A literal as a YAML file writes it (true, not True)."""
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else repr(value)


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(yaml_word(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return f"{type_name(args[0])} or null"
    if origin is list:
        return f"list of {type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        k, v = typing.get_args(tp)
        return f"mapping of {type_name(k)} to {type_name(v)}"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def did_you_mean(value: Any, choices: Any) -> str:
    """'; did you mean 'x'?' for the closest of `choices` to a misspelt string, else ''."""
    if not isinstance(value, str):
        return ""
    words = [c for c in choices if isinstance(c, str)]
    by_case = {c.lower(): c for c in words}  # chrF is chrf
    close = difflib.get_close_matches(value.lower(), list(by_case), n=1, cutoff=0.6)
    return f"; did you mean '{by_case[close[0]]}'?" if close else ""


def coerce(value: Any, tp: Any, key: str, where: str) -> Any:
    """Check `value` against the annotation `tp`; return it (ints widen to floats)."""
    origin = typing.get_origin(tp)

    def bad() -> NmtError:
        return NmtError(
            f"wrong type for '{key}' in {where}: expected {type_name(tp)}, got {value!r}"
        )

    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return coerce(value, inner, key, where)
    if origin is Literal:
        # typed: 1 is not true, and "true" (a string) is not true
        if not any(value == a and type(value) is type(a) for a in typing.get_args(tp)):
            raise NmtError(str(bad()) + did_you_mean(value, typing.get_args(tp)))
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad()
        (inner,) = typing.get_args(tp)
        return [coerce(v, inner, f"{key}[{i}]", where) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad()
        kt, vt = typing.get_args(tp)
        return {
            coerce(k, kt, key, where): coerce(v, vt, f"{key}.{k}", where) for k, v in value.items()
        }
    if tp is bool:
        if not isinstance(value, bool):
            raise bad()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return _int64(value, key, where)
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise bad() from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        return _finite(value, key, where)
    if tp is str:
        if not isinstance(value, str):
            raise bad()
        return value
    raise bad()  # pragma: no cover - every annotation above is handled


def _int64(value: int, key: str, where: str) -> int:
    if not INT_MIN <= value <= INT_MAX:  # torch, numpy and the checkpoint store int64
        raise NmtError(
            f"value out of range for '{key}' in {where}: expected an integer between "
            f"{INT_MIN} and {INT_MAX}, got {value}"
        )
    return value


def _finite(value: int | float, key: str, where: str) -> float:
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf
    if not math.isfinite(number):  # nan passes every comparison with a bound
        raise NmtError(
            f"value out of range for '{key}' in {where}: expected a finite number, got {value!r}"
        )
    return number


def check_range(f: dataclasses.Field, value: Any, key: str, where: str) -> None:
    lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    too_low = lo is not None and (value <= lo if f.metadata["lo_open"] else value < lo)
    too_high = hi is not None and (value >= hi if f.metadata["hi_open"] else value > hi)
    if too_low or too_high:
        lo_s = "" if lo is None else ("> " if f.metadata["lo_open"] else ">= ") + str(lo)
        hi_s = "" if hi is None else ("< " if f.metadata["hi_open"] else "<= ") + str(hi)
        expected = " and ".join(s for s in (lo_s, hi_s) if s)
        raise NmtError(
            f"value out of range for '{key}' in {where}: expected {expected}, got {value!r}"
        )
