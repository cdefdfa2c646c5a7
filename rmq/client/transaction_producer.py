"""``TransactionProducer``: transactional sends (``TransactionMQProducer`` /
``DefaultMQProducerImpl.sendMessageInTransaction`` of RocketMQ 4.9.8).

A transactional send stores a *half* message (``TRAN_MSG=true``, ``PGROUP``,
sysFlag PREPARED) that no consumer sees, runs the local transaction, then
tells the broker the outcome with a oneway END_TRANSACTION: COMMIT_MESSAGE
makes the message visible under its topic, ROLLBACK_MESSAGE drops it, UNKNOW
leaves it to the broker's back-check.  The broker later asks a producer of
the group (CHECK_TRANSACTION_STATE, handled by ``ClientRemotingProcessor``)
and the listener's ``check_local_transaction`` answers with another
END_TRANSACTION (``fromTransactionCheck=true``).

Listener methods may be plain functions or coroutines; they run on the
client's loop (like consumer listeners), so long blocking work belongs in an
executor.
"""

from __future__ import annotations

import enum
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from rmq.client.config import ClientConfig, ProducerConfig
from rmq.client.exceptions import MQClientError
from rmq.client.instance import MQClientInstance
from rmq.client.message import Message, MessageExt, SendResult, SendStatus
from rmq.client.producer import Producer
from rmq.client.trace import end_transaction_context
from rmq.common import message as mc
from rmq.common.codes import RequestCode
from rmq.common.message_id import decode_message_id
from rmq.common.protocol.headers_broker import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rmq.remoting import RemotingCommand

log = logging.getLogger("rmq.client")

CHECK_END_TIMEOUT_MS = 3000  # END_TRANSACTION answering a check (4.9.8: 3000 ms)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic, 4.9.8's spelling


_COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: mc.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: mc.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: mc.TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    """``TransactionListener``: both methods may also be ``async``."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """The half message's SendResult plus the local transaction's outcome."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _call(fn: Any, *args: Any) -> LocalTransactionState:
    """Run a listener method (plain or async); None counts as UNKNOW."""
    state = fn(*args)
    if inspect.isawaitable(state):
        state = await state
    if state is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(state, LocalTransactionState):
        raise TypeError(f"a transaction listener returned {state!r}, "
                        "not a LocalTransactionState")
    return state


class TransactionProducer(Producer):
    """A ``Producer`` with ``send_message_in_transaction``; ``listener``
    executes and checks local transactions for the whole group."""

    def __init__(self, group: str, namesrv_addr: str | None = None,
                 listener: TransactionListener | None = None,
                 config: ProducerConfig | None = None,
                 client_config: ClientConfig | None = None,
                 instance: MQClientInstance | None = None) -> None:
        super().__init__(group, namesrv_addr, config, client_config, instance)
        self.listener = listener

    def _prepare(self, msg: Message) -> tuple[bytes, int, str]:
        """As a plain send, plus sysFlag PREPARED for a half message."""
        body, sys_flag, props = super()._prepare(msg)
        if msg.properties.get(mc.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            sys_flag |= mc.TRANSACTION_PREPARED_TYPE
        return body, sys_flag, props

    async def send_message_in_transaction(self, msg: Message, arg: Any = None
                                          ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``execute_local_transaction(msg,
        arg)``, end the transaction with its outcome.  A send that fails raises
        MQClientError; a listener that raises leaves the state UNKNOW (the
        broker will check)."""
        if self.listener is None:
            raise MQClientError(-1, "TransactionListener is null")
        msg.properties.pop(mc.PROPERTY_DELAY_TIME_LEVEL, None)  # no delay for half messages
        self._validate(msg)
        msg.properties[mc.PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[mc.PROPERTY_PRODUCER_GROUP] = self.group
        try:
            sent = await self.send(msg)
        except Exception as exc:
            raise MQClientError(-1, f"send message Exception: {exc}") from exc
        state = LocalTransactionState.UNKNOW
        local_error: BaseException | None = None
        if sent.status is SendStatus.SEND_OK:
            try:
                state = await _call(self.listener.execute_local_transaction, msg, arg)
            except Exception as exc:
                log.info("executeLocalTransactionBranch exception: %r (%s)", exc, msg)
                local_error = exc
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info("executeLocalTransactionBranch return %s: %s", state.name, msg)
        else:  # stored, but not as safely as asked: give up the transaction
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(sent, state, local_error, msg)
        except Exception as exc:
            log.warning("local transaction execute %s, but end broker transaction failed: %s",
                        state.name, exc)
        return TransactionSendResult(sent.status, sent.msg_id, sent.offset_msg_id,
                                     sent.message_queue, sent.queue_offset, sent.region_id,
                                     sent.trace_on, state)

    async def end_transaction(self, sent: SendResult, state: LocalTransactionState,
                              local_error: BaseException | None = None,
                              msg: Message | None = None) -> None:
        """END_TRANSACTION (oneway) for the half message of ``sent`` to the
        master of the broker that stored it."""
        _, commit_log_offset = decode_message_id(sent.offset_msg_id or sent.msg_id)
        broker = sent.message_queue.broker_name
        addr = self.instance.find_broker_addr(broker, only_this=True)
        if addr is None:
            raise MQClientError(-1, f"The broker[{broker}] not exist")
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=sent.queue_offset,
            commitLogOffset=commit_log_offset, commitOrRollback=_COMMIT_OR_ROLLBACK[state],
            fromTransactionCheck=False, msgId=sent.msg_id, bname=broker)
        request = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header)
        if local_error is not None:
            request.remark = ("executeLocalTransactionBranch exception: "
                              f"{type(local_error).__name__}: {local_error}")
        if msg is not None:
            self._trace_end(msg, sent.msg_id, addr, state, False)
        await self.instance.remoting.invoke_oneway(addr, request, self.config.send_msg_timeout)

    def _trace_end(self, msg: Message, msg_id: str, addr: str, state: LocalTransactionState,
                   from_check: bool) -> None:
        """An EndTransaction trace record (the transaction id is the UNIQ_KEY)."""
        if self.tracer is None or msg.topic.startswith(self.tracer.topic):
            return
        self.tracer.append(end_transaction_context(
            self.group, msg, addr, self.instance.client_id, msg_id,
            msg.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), state.name, from_check))

    async def check_transaction_state(self, addr: str, msg: MessageExt,
                                      check: CheckTransactionStateRequestHeader) -> None:
        """The broker at ``addr`` asks for the state of ``msg``: run the
        listener's check and answer with END_TRANSACTION (oneway)."""
        if self.listener is None:
            log.warning("CheckTransactionState, pick transactionCheckListener by group[%s] "
                        "failed", self.group)
            return
        state = LocalTransactionState.UNKNOW
        remark = None
        try:
            state = await _call(self.listener.check_local_transaction, msg)
        except Exception as exc:
            log.error("Broker call checkTransactionState, but checkLocalTransactionState "
                      "exception: %r", exc)
            remark = f"checkLocalTransactionState Exception: {type(exc).__name__}: {exc}"
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.warning("when broker check, client answers %s for %s", state.name, msg.msg_id)
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=check.tranStateTableOffset,
            commitLogOffset=check.commitLogOffset, commitOrRollback=_COMMIT_OR_ROLLBACK[state],
            fromTransactionCheck=True,
            msgId=msg.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            or msg.offset_msg_id,
            transactionId=check.transactionId, bname=check.bname)
        request = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header)
        request.remark = remark
        self._trace_end(msg, header.msgId, addr, state, True)
        try:
            await self.instance.remoting.invoke_oneway(addr, request, CHECK_END_TIMEOUT_MS)
        except Exception as exc:
            log.error("endTransactionOneway exception: %s", exc)
