"""Message objects the store takes and gives back.

Mirrors ``MessageExt``, ``MessageExtBrokerInner`` and ``MessageExtBatch`` of
4.9.8.  Hosts are ``(ip, port)`` tuples; ``properties_string`` is what goes
into the record verbatim (the broker builds it, see
``message_codec.message_properties_to_string``), ``properties`` the parsed map
the store reads decisions from (DELAY, WAIT, KEYS, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmq.common import message as mc

Host = tuple[str, int]


def wait_store_msg_ok(value: str | None) -> bool:
    """4.9.8's ``isWaitStoreMsgOK`` of a WAIT property value: absent means the
    sender waits, else ``Boolean.parseBoolean`` ("true" in any letter case;
    "false", "FALSE", "yes", ... do not wait)."""
    return value is None or value.lower() == "true"


@dataclass(slots=True)
class MessageExt:
    """A stored message as decoded from the commit log."""

    topic: str = ""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: Host = ("0.0.0.0", 0)
    msg_id: str = ""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(mc.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(mc.PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message on its way into the commit log (one single send)."""

    topic: str = ""
    queue_id: int = 0
    flag: int = 0
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str = ""
    tags_code: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host = ("127.0.0.1", 0)
    store_timestamp: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def property(self, name: str) -> str | None:
        return self.properties.get(name)

    def is_wait_store_msg_ok(self) -> bool:
        return wait_store_msg_ok(self.properties.get(mc.PROPERTY_WAIT_STORE_MSG_OK))

    def delay_time_level(self) -> int:
        text = self.properties.get(mc.PROPERTY_DELAY_TIME_LEVEL)
        try:
            return int(text) if text else 0
        except ValueError:
            return 0


@dataclass(slots=True)
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE as received: the wire body holds the inner records
    (STORE_FORMAT.md 2.14); the header fields are shared by all of them."""

    topic: str = ""
    queue_id: int = 0
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    flag: int = 0

    def is_wait_store_msg_ok(self) -> bool:
        return wait_store_msg_ok(self.properties.get(mc.PROPERTY_WAIT_STORE_MSG_OK))
