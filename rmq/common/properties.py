"""Java ``.properties`` files and config objects with RocketMQ property names.

RocketMQ reads broker.conf / namesrv.conf with ``java.util.Properties`` and
applies each key to the config objects through their setters
(``MixAll.properties2Object``).  rmq's config objects are dataclasses whose
field names *are* the property names (camelCase), so the mapping is exact and
lives here only.  Conversion follows Java: ints/longs/floats parsed strictly,
booleans by ``Boolean.parseBoolean`` (only "true", any case), strings as is;
unparsable values leave the default (and are reported to the caller, who may
choose to refuse them).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A bad config file or setting; the message is one line for the operator."""


def _unescape(text: str) -> str:
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < n:
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    buf = ""
    # Java ends lines only at \n, \r or \r\n (not at the other Unicode breaks)
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not buf and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        yield buf + line
        buf = ""
    if buf:
        yield buf


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text the way ``java.util.Properties.load`` does."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                key_end = i
                break
            i += 1
        key = line[:key_end]
        rest = line[key_end:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file; a missing or unreadable file is a ConfigError."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid UTF-8") from exc


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!" or (c == " " and (is_key or i == 0)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: dict[str, Any]) -> str:
    """Properties text, one ``key=value`` per line, in the given order
    (``MixAll.properties2String`` writes ``key=value\\n``)."""
    return "".join(f"{_escape(k, True)}={_escape(_to_text(v), False)}\n" for k, v in props.items())


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def java_parse_bool(text: str) -> bool:
    """``Boolean.parseBoolean``: only "true" (any case) is true."""
    return text.strip().lower() == "true" if text is not None else False


def convert_value(text: str, default: Any) -> Any:
    """Convert ``text`` to the type of ``default`` as MixAll.properties2Object
    does; raises ValueError when it cannot be parsed."""
    if isinstance(default, bool):
        return text.lower() == "true"
    if isinstance(default, (int, float)) and text != text.strip():
        # Java's number parsers reject surrounding whitespace
        raise ValueError(f"not a number: {text!r}")
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    return text


def config_fields(obj: Any) -> dict[str, Any]:
    """Property name -> current value of a config dataclass."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name[0] != "_"}


def apply_properties(obj: Any, props: dict[str, str]) -> tuple[list[str], list[str]]:
    """Set every known property of ``obj`` from ``props``.

    Returns ``(applied, invalid)``: names applied and names whose value could
    not be parsed (the default kept, as Java does).  Unknown keys are neither.
    """
    applied: list[str] = []
    invalid: list[str] = []
    fields = {f.name for f in dataclasses.fields(obj)}
    for key, text in props.items():
        if key not in fields or key.startswith("_"):
            continue
        try:
            setattr(obj, key, convert_value(text, getattr(obj, key)))
            applied.append(key)
        except ValueError:
            invalid.append(key)
    return applied, invalid


def unknown_keys(props: dict[str, str], *objs: Any) -> list[str]:
    """Keys of ``props`` that none of the config objects declares."""
    known: set[str] = set()
    for obj in objs:
        known.update(f.name for f in dataclasses.fields(obj))
    return [k for k in props if k not in known]


STRICT_CONFIG_KEY = "strictConfig"


def check_unknown_keys(path: str, props: dict[str, str], objs: Iterable[Any], strict: bool,
                       extra: Iterable[str] = ()) -> list[str]:
    """Keys of a config file that no setting declares.  4.9.8 ignores them, so
    by default they come back as warnings (one line each) for the caller to
    print; in strict mode (``strict``, or ``strictConfig=true`` in the file) a
    typo refuses the start with a ConfigError naming every unknown key."""
    allowed = set(extra) | {STRICT_CONFIG_KEY}
    unknown = [k for k in unknown_keys(props, *objs) if k not in allowed]
    if not unknown:
        return []
    if strict or props.get(STRICT_CONFIG_KEY, "").strip().lower() == "true":
        raise ConfigError(f"unknown setting(s) in {path}: {', '.join(sorted(unknown))} "
                          f"(strict mode refuses keys no setting declares)")
    return [f"config file {path}: unknown key {key} ignored" for key in unknown]


def java_text(value: Any) -> str:
    """A value as ``MixAll.printObjectProperties`` shows it (null as empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)
