"""Typed custom headers: Java header classes <-> the extFields string map.

RocketMQ flattens every ``CommandCustomHeader`` into ``extFields`` with the
exact Java field names and ``toString()`` values, and decodes it back field by
field (``RemotingCommand.decodeCommandCustomHeader``):

* a missing ``@CFNotNull`` field -> ``RemotingCommandException("the custom field
  <name> is null")``, which the dispatcher answers with SYSTEM_ERROR;
* a value that does not parse (``"abc"`` for an Integer) is only logged in Java:
  an optional field keeps its default.  A required one would stay null and
  fail later with a NullPointerException (SYSTEM_ERROR); here it fails at once,
  with a remark that names the field and the value;
* booleans follow ``Boolean.parseBoolean`` (only "true", any case, is true);
* unknown keys are ignored.

A header class is declared once::

    @dataclass(slots=True)
    class PullMessageRequestHeader(CommandHeader):
        consumerGroup: str = field_required()
        queueId: int = field_required()
        subscription: str | None = None

Supported field types: str, int, bool, float and their Optional forms.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any, Self

from rmq.common.exceptions import RemotingCommandError

_REQUIRED = "rmq_required"
_INT_RE = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_FLOAT_RE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\Z")


def field_required() -> Any:
    """A ``@CFNotNull`` field: decoding fails when the key is absent."""
    return dataclasses.field(default=None, metadata={_REQUIRED: True})


def invalid_value(name: str, text: str) -> RemotingCommandError:
    """The error of a required field whose value does not parse (or is out
    of range): names the field and shows the value."""
    return RemotingCommandError(f"the custom field {name} is not a valid value: {text[:64]!r}")


def _parse_int(text: str) -> int:
    """``Long.parseLong``: optional sign and ASCII digits only, no spaces."""
    if _INT_RE.match(text) is None:
        raise ValueError(text)
    return int(text)


def _parse_bool(text: str) -> bool:
    return text.lower() == "true"


def _parse_float(text: str) -> float:
    """``Double.parseDouble`` accepts surrounding spaces and a d/f suffix."""
    t = text.strip()
    if _FLOAT_RE.match(t) is None:
        raise ValueError(text)
    t = t.rstrip("fFdD") if t[-1:] in "fFdD" and "Infinity" not in t else t
    return float(t.replace("Infinity", "inf"))


def _parse_str(text: str) -> str:
    return text


def _format_bool(value: bool) -> str:
    return "true" if value else "false"


def _format_float(value: float) -> str:
    """Java ``Double.toString`` for the values headers carry."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


_PARSERS = {str: _parse_str, int: _parse_int, bool: _parse_bool, float: _parse_float}
_FORMATTERS = {str: str, int: str, bool: _format_bool, float: _format_float}


def _base_type(hint: Any) -> type:
    """``int | None`` -> int; rejects types the wire cannot carry."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(
        hint) is typing.Union else ()
    if args:
        real = [a for a in args if a is not type(None)]
        if len(real) != 1:
            raise TypeError(f"unsupported header field type {hint!r}")
        hint = real[0]
    if hint not in _PARSERS:
        raise TypeError(f"unsupported header field type {hint!r}")
    return hint


class _FieldSpec(typing.NamedTuple):
    name: str
    required: bool
    parse: typing.Callable[[str], Any]
    fmt: typing.Callable[[Any], str]


_SPECS: dict[type, tuple[_FieldSpec, ...]] = {}


def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    """Per-class field table, computed once (type hints are resolved lazily so
    header modules may use ``from __future__ import annotations``)."""
    specs = _SPECS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        built = []
        for f in dataclasses.fields(cls):
            base = _base_type(hints[f.name])
            built.append(_FieldSpec(f.name, bool(f.metadata.get(_REQUIRED)),
                                    _PARSERS[base], _FORMATTERS[base]))
        specs = _SPECS[cls] = tuple(built)
    return specs


class CommandHeader:
    """Base of the ``@dataclass(slots=True)`` header classes."""

    __slots__ = ()

    def to_ext_fields(self) -> dict[str, str]:
        """Every non-None field as its Java ``toString()``."""
        out: dict[str, str] = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.name)
            if value is not None:
                out[spec.name] = spec.fmt(value)
        return out

    @classmethod
    def from_ext_fields(cls, ext: dict[str, str] | None) -> Self:
        """Decode with Java's rules (see the module docstring)."""
        obj = cls()
        get = (ext or {}).get
        for spec in _specs(cls):
            text = get(spec.name)
            if text is None:
                if spec.required:
                    raise RemotingCommandError(f"the custom field {spec.name} is null")
                continue
            try:
                value = spec.parse(text)
            except ValueError:
                if spec.required:
                    raise invalid_value(spec.name, text) from None
                continue
            setattr(obj, spec.name, value)
        return obj
