"""MessageRequestModeManager: how each group consumes each topic (PULL or POP),
set with mqadmin ``setConsumeMode`` (SET_MESSAGE_REQUEST_MODE) and kept in
``config/messageRequestMode.json`` as RocketMQ 5.3.3 writes it::

    {"messageRequestModeMap":{"<topic>":{"<group>":{"consumerGroup":"<group>",
        "mode":"POP","popShareQueueNum":0,"topic":"<topic>"}}}}
"""

from __future__ import annotations

import os
from typing import Any

from rmq.common.config_manager import ConfigManager, dumps, parse_json

MODES = ("PULL", "POP")


def parse_mode_body(obj: Any) -> dict[str, Any]:
    """A SetMessageRequestModeRequestBody, checked; ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("the body is not a JSON object")
    topic, group = obj.get("topic"), obj.get("consumerGroup")
    if not isinstance(topic, str) or not topic or not isinstance(group, str) or not group:
        raise ValueError("topic and consumerGroup are required")
    mode = obj.get("mode", "PULL")
    if mode not in MODES:
        raise ValueError(f"mode must be PULL or POP, not {mode!r}")
    try:
        share = int(obj.get("popShareQueueNum", 0))
    except (TypeError, ValueError):
        raise ValueError("popShareQueueNum is not a number") from None
    return {"consumerGroup": group, "mode": mode, "popShareQueueNum": share, "topic": topic}


class MessageRequestModeManager(ConfigManager):
    def __init__(self, store_root: str) -> None:
        self.store_root = store_root
        self.table: dict[str, dict[str, dict[str, Any]]] = {}

    def set_mode(self, body: dict[str, Any]) -> None:
        self.table.setdefault(body["topic"], {})[body["consumerGroup"]] = body
        self.persist()

    def mode_of(self, topic: str, group: str) -> str:
        return self.table.get(topic, {}).get(group, {}).get("mode", "PULL")

    def config_file_path(self) -> str:
        return os.path.join(self.store_root, "config", "messageRequestMode.json")

    def encode(self, pretty: bool = False) -> str:
        return dumps({"messageRequestModeMap": self.table}, pretty)

    def decode(self, text: str) -> None:
        obj = parse_json(text).get("messageRequestModeMap") or {}
        if not isinstance(obj, dict):
            raise ValueError("messageRequestModeMap is not a JSON object")
        for topic, groups in obj.items():
            for body in (groups or {}).values():
                b = parse_mode_body(body)
                self.table.setdefault(topic, {})[b["consumerGroup"]] = b
