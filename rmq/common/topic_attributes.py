"""Topic attributes of RocketMQ 5.x (``TopicAttributes``, ``AttributeParser``,
``AttributeUtil``).

A request carries them as ``+key=value`` (add or change) and ``-key`` (remove),
comma separated; the topic config keeps the resulting ``key -> value`` map in
its ``attributes`` JSON object.  Unknown keys, values outside an attribute's
range and changes of unchangeable attributes are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


class AttributeError_(ValueError):
    """An attribute string or change 5.3.3 would refuse."""


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    changeable: bool
    values: tuple[str, ...] | None  # an enum; None: a long range
    low: int = 0
    high: int = 0

    def verify(self, value: str) -> None:
        if self.values is not None:
            if value not in self.values:
                raise AttributeError_(f"value is not in set: {', '.join(sorted(self.values))}")
            return
        try:
            n = int(value)
        except ValueError:
            raise AttributeError_(f"value is not a number: {value}") from None
        if not self.low <= n <= self.high:
            raise AttributeError_(f"value is not in range({self.low}, {self.high})")


ALL: dict[str, Attribute] = {a.name: a for a in (
    Attribute("queue.type", False, ("BatchCQ", "SimpleCQ")),
    Attribute("cleanup.policy", False, ("DELETE", "COMPACTION")),
    Attribute(MESSAGE_TYPE, True, MESSAGE_TYPES),
    Attribute("reserve.time", True, None, -1, (1 << 63) - 1),
)}


def parse(text: str | None) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``"+a=1,-b"`` -> ``{"+a": "1", "-b": ""}``."""
    out: dict[str, str] = {}
    if not text:
        return out
    for kv in text.split(","):
        if kv.startswith("+"):
            key, sep, value = kv.partition("=")
            if not sep or len(key) < 2 or not value:
                raise AttributeError_(f"add/alter attribute format is wrong: {kv}")
            out[key] = value
        elif kv.startswith("-"):
            if "=" in kv or len(kv) < 2:
                raise AttributeError_(f"delete attribute format is wrong: {kv}")
            out[kv] = ""
        else:
            raise AttributeError_(f"attribute format is wrong: {kv}")
    return out


def alter(create: bool, current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """``AttributeUtil.alterCurrentAttributes``: the attributes after ``changes``."""
    result = dict(current)
    seen: set[str] = set()
    for key, value in changes.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise AttributeError_("kv string format wrong.")
        if real in seen:
            raise AttributeError_(f"alter duplication key. key: {real}")
        seen.add(real)
        attr = ALL.get(real)
        if create and not key.startswith("+"):
            raise AttributeError_("only add attribute is supported while creating topic. "
                                  f"key: {real}")
        if attr is None:
            raise AttributeError_(f"unsupported key: {real}")
        init = create
        if key.startswith("-"):
            if real not in current:
                raise AttributeError_(f"attempt to delete a nonexistent key: {real}")
            if not attr.changeable:
                raise AttributeError_(f"attempt to update an unchangeable attribute. key: {real}")
            result.pop(real, None)
            continue
        if not init and not attr.changeable:
            raise AttributeError_(f"attempt to update an unchangeable attribute. key: {real}")
        attr.verify(value)
        result[real] = value
    return result


def message_type(attributes: dict[str, str] | None) -> str:
    """``TopicConfig.getTopicMessageType``: NORMAL unless set."""
    return (attributes or {}).get(MESSAGE_TYPE, "NORMAL")
