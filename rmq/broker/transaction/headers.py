"""Custom headers of END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39)
(../shared/spec/PROTOCOL.md 3.2.5 and 3.2.6), shared by the broker and the
client's transactional producer."""

from __future__ import annotations

from dataclasses import dataclass

from rmq.remoting.header import CommandHeader, field_required


@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    producerGroup: str = field_required()
    tranStateTableOffset: int = field_required()
    commitLogOffset: int = field_required()
    commitOrRollback: int = field_required()
    fromTransactionCheck: bool = False
    msgId: str = field_required()
    transactionId: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    tranStateTableOffset: int = field_required()
    commitLogOffset: int = field_required()
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    bname: str | None = None
