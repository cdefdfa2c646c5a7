"""ConfigManager: load/persist of the broker's JSON files (RocketMQ ``ConfigManager``).

Persist (``MixAll.string2File``, made crash-safe): the new text goes to
``{file}.tmp`` and is fsynced; the current ``{file}`` becomes ``{file}.bak``
(a hard link to it, renamed into place); then ``{file}.tmp`` is renamed over
``{file}`` (atomic).

Load: ``{file}``; when it is missing, empty or cannot be decoded, ``{file}.bak``.
A missing or empty ``.bak`` means "nothing saved yet" (defaults only); a
corrupt ``.bak`` after a corrupt file is a load failure that the broker
refuses to start with (``ConfigLoadError`` carries the one-line reason).

The files are written in fastjson's pretty format (STORE_FORMAT.md §15.2) so
that a RocketMQ 4.9.8 broker reads them unchanged: one tab per level, members
sorted, ``"name":value`` without spaces, integer-keyed maps on one line with
bare keys (``{0:250,1:249`` then a newline and the closing brace).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rmq.common import fastjson
from rmq.common.logging import BROKER_LOGGER_NAME

log = logging.getLogger(BROKER_LOGGER_NAME)


class ConfigLoadError(Exception):
    """A config file and its .bak are both unusable."""


def _is_int_key(k: Any) -> bool:
    return isinstance(k, int) and not isinstance(k, bool)


def _sort_key(k: Any) -> tuple[int, Any]:
    return (0, k) if _is_int_key(k) else (1, str(k))


def _pretty(obj: Any, level: int, out: list[str]) -> None:
    if isinstance(obj, dict):
        items = [(k, obj[k]) for k in sorted(obj, key=_sort_key) if obj[k] is not None]
        if not items:
            out.append("{}")
            return
        if all(_is_int_key(k) for k, _ in items):
            # fastjson writes integer-keyed maps without line breaks between entries
            # (an object value is still pretty, one level deeper)
            out.append("{")
            for i, (k, v) in enumerate(items):
                out.append(("," if i else "") + f"{k}:")
                _pretty(v, level + 1, out)
            out.append("\n" + "\t" * level + "}")
            return
        out.append("{")
        for i, (k, v) in enumerate(items):
            out.append(("," if i else "") + "\n" + "\t" * (level + 1))
            out.append(fastjson.dumps(str(k)).decode() + ":")
            _pretty(v, level + 1, out)
        out.append("\n" + "\t" * level + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        out.append("[")
        for i, v in enumerate(obj):
            out.append(("," if i else "") + "\n" + "\t" * (level + 1))
            _pretty(v, level + 1, out)
        out.append("\n" + "\t" * level + "]")
    else:
        out.append(fastjson.dumps(obj).decode())


def pretty_dumps(obj: Any, level: int = 0) -> str:
    """fastjson ``toJSONString(obj, true)`` for the plain dict/list shapes used
    here (``level``: the value's depth inside a larger document)."""
    out: list[str] = []
    _pretty(obj, level, out)
    return "".join(out)


pretty_into = _pretty  # (obj, level, out): pretty_dumps's pieces appended to ``out``


def write_file_safely(text: str, path: str) -> None:
    """tmp file (fsynced) -> current file to .bak -> atomic rename into place."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    _keep_as_bak(path)
    os.replace(tmp, path)


def _keep_as_bak(path: str) -> None:
    """The current file becomes ``{path}.bak``: a second name for it (a hard
    link, put in place by a rename), so keeping it costs the same whatever
    its size; where links cannot be made, a copy of its text."""
    bak = path + ".bak"
    try:
        os.link(path, bak + ".tmp")
    except FileExistsError:
        os.unlink(bak + ".tmp")  # left by an interrupted persist
        return _keep_as_bak(path)
    except FileNotFoundError:
        return  # nothing saved yet
    except OSError:
        try:
            with open(path, encoding="utf-8") as f:
                previous = f.read()
        except (OSError, UnicodeDecodeError):
            return
        with open(bak, "w", encoding="utf-8") as f:
            f.write(previous)
        return
    os.replace(bak + ".tmp", bak)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


class ConfigManager:
    """Base of the JSON-backed managers: subclasses give path, encode and decode."""

    def config_file_path(self) -> str:
        raise NotImplementedError

    def encode(self, pretty: bool = False) -> str:
        raise NotImplementedError

    def decode(self, text: str) -> None:
        """Merge/replace the in-memory state from ``text``; raise on any defect."""
        raise NotImplementedError

    def load(self) -> None:
        """File, then .bak; raises ConfigLoadError when neither can be used."""
        path = self.config_file_path()
        try:
            text = _read(path)
            if text:
                self.decode(text)
                log.info("load %s OK", path)
                return
        except Exception as exc:  # any decode defect: fall back to the .bak copy
            log.warning("load %s failed (%s), trying %s.bak", path, exc, path)
            first_error = f"{exc}"
        else:
            first_error = "missing or empty"
        bak = path + ".bak"
        try:
            text = _read(bak)
        except OSError as exc:
            raise ConfigLoadError(f"cannot read {bak}: {exc.strerror}") from None
        if not text:
            return
        try:
            self.decode(text)
        except Exception as exc:  # both copies unusable: refuse to start
            raise ConfigLoadError(
                f"config file {path} ({first_error}) and its backup {bak} ({exc}) are both "
                f"unreadable; repair or remove them") from None
        log.info("load %s OK", bak)

    def persist(self) -> None:
        """Write the current state; an I/O error is logged, never raised (as Java)."""
        path = self.config_file_path()
        try:
            write_file_safely(self.encode(pretty=True), path)
        except OSError as exc:
            log.error("persist file %s exception: %s", path, exc)


def parse_json(text: str) -> Any:
    """fastjson's lenient reader; a non-object top level is a defect."""
    obj = fastjson.loads(text)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def dumps(obj: Any, pretty: bool) -> str:
    return pretty_dumps(obj) if pretty else fastjson.dumps(obj).decode("utf-8")
