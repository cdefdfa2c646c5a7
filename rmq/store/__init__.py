"""The message store: commit log, consume queues, index, checkpoint, recovery,
flush and clean services (RocketMQ 4.9.8's ``store`` module).  See
docs/store.md and ../shared/spec/STORE_FORMAT.md."""

from rmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from rmq.store.default_message_store import DefaultMessageStore, StoreLockedError
from rmq.store.message import MessageExt, MessageExtBatch, MessageExtBrokerInner
from rmq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

__all__ = [
    "AppendMessageResult", "AppendMessageStatus", "BrokerRole", "DefaultMessageStore", "FlushDiskType",
    "GetMessageResult", "GetMessageStatus", "MessageExt", "MessageExtBatch", "MessageExtBrokerInner",
    "MessageStoreConfig", "PutMessageResult", "PutMessageStatus", "QueryMessageResult", "StoreLockedError",
]
