"""The message sets the interop scenarios send, and how their arrival is checked.

Every message carries a unique key; bodies are compared by SHA-256 and length, so
a received message can be matched to what was sent without trusting the broker's
ids.  Binary bodies contain NUL and high bytes; large ones are above the C++
client's 4 KiB compression threshold (it sets the compressed sysFlag and zlibs).
"""

from __future__ import annotations

import hashlib
import random


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def text_message(topic: str, key: str, tags: str = "TagA", mode: str = "sync",
                 size: int | None = None, props: dict[str, str] | None = None,
                 arg: int | None = None) -> dict:
    body = f"body of {key} ".encode()
    if size is not None:
        body = (body * (size // len(body) + 1))[:size]
    spec = {"topic": topic, "tags": tags, "keys": key, "mode": mode, "body_hex": body.hex(),
            "props": props or {"color": "red", "shape": f"s-{key}"}}
    if arg is not None:
        spec["arg"] = arg
    return spec


def binary_message(topic: str, key: str, size: int, seed: int, tags: str = "TagBin") -> dict:
    """Random bytes with NULs in them (first byte 0, so C-string handling would lose all)."""
    rnd = random.Random(seed)
    body = bytes([0]) + bytes(rnd.randrange(256) for _ in range(size - 1))
    return {"topic": topic, "tags": tags, "keys": key, "mode": "sync", "body_hex": body.hex(),
            "props": {"color": "bin"}}


def mixed_set(topic: str, prefix: str = "m") -> list[dict]:
    """Sync, oneway and orderly sends, big compressible and binary bodies: 24 messages."""
    msgs = [text_message(topic, f"{prefix}-sync-{i}", tags="TagA" if i % 2 else "TagB")
            for i in range(8)]
    msgs += [text_message(topic, f"{prefix}-oneway-{i}", mode="oneway") for i in range(4)]
    msgs += [text_message(topic, f"{prefix}-orderly-{i}", mode="orderly", arg=i % 4)
             for i in range(8)]
    msgs += [text_message(topic, f"{prefix}-big-{i}", size=12_000 + 1000 * i) for i in range(2)]
    msgs += [binary_message(topic, f"{prefix}-bin-small", 300, seed=1),
             binary_message(topic, f"{prefix}-bin-big", 9000, seed=2)]
    return msgs


def body_of(spec: dict) -> bytes:
    return bytes.fromhex(spec["body_hex"])


def body_lengths(msgs: list[dict]) -> dict[str, int]:
    """Key -> body length, for the driver to read binary bodies past their NULs."""
    return {m["keys"]: len(body_of(m)) for m in msgs}


def check_received(sent: dict, got: dict, uniq_key: bool = True) -> list[str]:
    """Differences between one sent message spec and one received record.

    ``uniq_key``: the producer sets UNIQ_KEY (the C++ client does, ali-ons does not).
    """
    diffs = []
    body = body_of(sent)
    if got["topic"] != sent["topic"]:
        diffs.append(f"topic {got['topic']!r} != {sent['topic']!r}")
    if got["tags"] != sent.get("tags", ""):
        diffs.append(f"tags {got['tags']!r} != {sent.get('tags')!r}")
    if got["body_sha"] != sha(body) or got["body_len"] != len(body):
        diffs.append(f"body differs (len {got['body_len']} vs {len(body)}, "
                     f"head {got['body_head'][:20]!r})")
    for key, value in (sent.get("props") or {}).items():
        if got["props"].get(key) != value:
            diffs.append(f"property {key}={got['props'].get(key)!r} != {value!r}")
    if uniq_key and not got["props"].get("UNIQ_KEY"):
        diffs.append("no UNIQ_KEY property")
    return [f"{sent['keys']}: {d}" for d in diffs]
