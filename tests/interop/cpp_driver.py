"""One interop scenario run by the real RocketMQ C++ client, in its own process.

librocketmq (the PyPI ``rocketmq`` 0.4.4 wheel) keeps global state and background
threads, and a protocol disagreement can crash it; so every scenario runs here, in
a child process, and a crash fails one test instead of pytest.  The parent passes a
JSON spec file as the only argument and reads one JSON object from the last stdout line
(a push consumer writes one before its shutdown too, see ``op_push``).
The client logs to ``$HOME/logs/rocketmq-cpp/``; the parent points HOME at a
scenario directory and scans those logs (see ``cpp_logs.py``).

The ``rocketmq.client`` wrapper is used where it is faithful; the C API is called
directly where the wrapper loses information: binary bodies (``SetMessageBody`` and
``GetMessageBody`` stop at the first NUL), consume status (the wrapper re-raises
inside the ctypes callback, so RECONSUME_LATER never reaches the library) and pull
results (the wrapper hides statuses and offsets).

Ops (each may carry "credentials": {"access_key","secret_key","channel"}: the
client's session credentials, so that it signs its requests for plain ACL):
  produce  {"messages": [{"topic","tags","keys","props","body"|"body_hex","mode","arg",
                         "wait_for"}]}   (a message with wait_for waits for that file)
  push     {"group","topic","expression","out","stop","max_s","fail_first_keys","fail_dir",
            "body_len"}
  pull     {"group","topic","expression","offsets","max_num","body_len"}
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import time
from typing import Any

from rocketmq.client import Message, Producer, RecvMessage
from rocketmq.exceptions import RocketMQException
from rocketmq.ffi import (
    MSG_CALLBACK_FUNC,
    MessageModel,
    _CMessageQueue,
    _CPullStatus,
    dll,
)

# Body bytes are read through a raw pointer so that NULs survive.
dll.GetMessageBody.restype = ctypes.c_void_p

PULL_STATUS = {s.value: s.name for s in _CPullStatus}
RECONSUME_LATER = 1
CONSUME_SUCCESS = 0
# a push result written before the consumer's shutdown (harness.BEFORE_SHUTDOWN)
BEFORE_SHUTDOWN = "before_shutdown"


def _check(status: int, what: str) -> None:
    """Raise with the library's own error text when a C call fails."""
    if status != 0:
        text = dll.GetLatestErrorMessage()
        raise RocketMQException(f"{what} failed ({status}): {text.decode(errors='replace') if text else ''}")


def _body_of(spec: dict) -> bytes:
    if "body_hex" in spec:
        return bytes.fromhex(spec["body_hex"])
    return spec.get("body", "").encode()


def _message(spec: dict) -> Message:
    msg = Message(spec["topic"])
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    for key, value in (spec.get("props") or {}).items():
        msg.set_property(key, value)
    body = _body_of(spec)
    _check(dll.SetByteMessageBody(msg._handle, body, len(body)), "SetByteMessageBody")
    return msg


def op_produce(spec: dict) -> dict:
    """Send each message in its mode; a failure is recorded, not raised.
    ``pause_ms`` spaces the sends (a producer running across a broker kill)."""
    producer = Producer(spec.get("group", "interop_pg"), timeout=spec.get("timeout_ms", 5000))
    producer.set_namesrv_addr(spec["namesrv"])
    if spec.get("credentials"):
        cred = spec["credentials"]
        producer.set_session_credentials(cred["access_key"], cred["secret_key"],
                                         cred.get("channel", "ALIYUN"))
    producer.start()
    results = []
    try:
        for m in spec["messages"]:
            _wait_for_file(m.get("wait_for"), spec.get("max_s", 60))
            time.sleep(spec.get("pause_ms", 0) / 1000)
            msg = _message(m)
            mode = m.get("mode", "sync")
            try:
                if mode == "sync":
                    r = producer.send_sync(msg)
                    results.append({"ok": True, "status": r.status.name, "msg_id": r.msg_id,
                                    "offset": r.offset})
                elif mode == "oneway":
                    producer.send_oneway(msg)
                    results.append({"ok": True})
                elif mode == "orderly":
                    r = producer.send_orderly(msg, m["arg"], retry_times=m.get("retries", 3))
                    results.append({"ok": True, "status": r.status.name, "msg_id": r.msg_id,
                                    "offset": r.offset})
                else:
                    raise ValueError(f"unknown mode {mode}")
            except RocketMQException as e:
                results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    finally:
        producer.shutdown()
    return {"results": results}


def _wait_for_file(path: str | None, max_s: float) -> None:
    """Hold a send until the parent says so (a producer kept across a broker restart)."""
    deadline = time.monotonic() + max_s
    while path is not None and not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def _describe(handle: int, body_len: dict[str, int]) -> dict[str, Any]:
    """Everything a test compares about one received message (bodies as sha256)."""
    m = RecvMessage(handle)
    keys = (m.keys or b"").decode(errors="replace")
    ptr = dll.GetMessageBody(handle)
    if keys in body_len:
        body = ctypes.string_at(ptr, body_len[keys]) if ptr else b""
    else:
        body = ctypes.string_at(ptr) if ptr else b""
    props = {}
    for name in ("UNIQ_KEY", "color", "shape", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID"):
        value = m.get_property(name)
        if value:
            props[name] = value.decode(errors="replace")
    return {
        "topic": m.topic, "tags": (m.tags or b"").decode(errors="replace"), "keys": keys,
        "id": m.id, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "reconsume_times": m.reconsume_times, "store_size": m.store_size,
        "body_sha": hashlib.sha256(body).hexdigest(), "body_len": len(body),
        "body_head": body[:64].decode(errors="replace"), "props": props,
    }


def _first_sight(fail_dir: str, key: str) -> bool:
    """The first delivery of ``key`` anywhere in the group: instances share a marker
    file created with O_EXCL, so exactly one delivery of it fails."""
    try:
        os.close(os.open(os.path.join(fail_dir, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def op_push(spec: dict) -> dict:
    """Clustering push consumer; each message is appended to ``out`` as it arrives.

    Runs until the ``stop`` file exists (the parent decides when the group has seen
    enough) or ``max_s`` passes.  Messages whose key is in ``fail_first_keys`` are
    answered RECONSUME_LATER on their first delivery in the group only.
    """
    group = spec["group"]
    handle = dll.CreatePushConsumer(group.encode())
    _check(dll.SetPushConsumerNameServerAddress(handle, spec["namesrv"].encode()), "namesrv")
    _check(dll.SetPushConsumerMessageModel(handle, MessageModel.CLUSTERING), "model")
    if spec.get("credentials"):
        cred = spec["credentials"]
        _check(dll.SetPushConsumerSessionCredentials(
            handle, cred["access_key"].encode(), cred["secret_key"].encode(),
            cred.get("channel", "ALIYUN").encode()), "credentials")
    if spec.get("instance"):
        _check(dll.SetPushConsumerInstanceName(handle, spec["instance"].encode()), "instance")
    _check(dll.SetPushConsumerThreadCount(handle, spec.get("threads", 2)), "threads")
    # one message per listener call, so RECONSUME_LATER sends back only that message
    _check(dll.SetPushConsumerMessageBatchMaxSize(handle, spec.get("batch", 1)), "batch")
    _check(dll.Subscribe(handle, spec["topic"].encode(), spec.get("expression", "*").encode()),
           "Subscribe")
    fail_first = set(spec.get("fail_first_keys", []))
    body_len = spec.get("body_len", {})
    out = open(spec["out"], "a", buffering=1)

    def on_message(_consumer, msg) -> int:
        record = _describe(msg, body_len)
        record["status"] = "ok"
        if record["keys"] in fail_first and _first_sight(spec["fail_dir"], record["keys"]):
            record["status"] = "later"
        out.write(json.dumps(record) + "\n")
        return RECONSUME_LATER if record["status"] == "later" else CONSUME_SUCCESS

    callback = MSG_CALLBACK_FUNC(on_message)
    _check(dll.RegisterMessageCallback(handle, callback), "RegisterMessageCallback")
    _check(dll.StartPushConsumer(handle), "StartPushConsumer")
    deadline = time.monotonic() + spec.get("max_s", 60)
    while not os.path.exists(spec["stop"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    out.close()
    result = {"stopped_by": "stop" if os.path.exists(spec["stop"]) else "max_s"}
    # Every delivery is in ``out`` now.  librocketmq has aborted inside its own
    # shutdown (a boost::thread_interrupted escaping a worker), so the parent gets
    # the result first, marked as not yet shut down, and then the final one.
    _emit(dict(result, ok=True, phase=BEFORE_SHUTDOWN))
    _check(dll.ShutdownPushConsumer(handle), "ShutdownPushConsumer")
    _check(dll.DestroyPushConsumer(handle), "DestroyPushConsumer")
    return result


def op_pull(spec: dict) -> dict:
    """Queues from the route, then every queue pulled from its start offset to its end."""
    handle = dll.CreatePullConsumer(spec["group"].encode())
    _check(dll.SetPullConsumerNameServerAddress(handle, spec["namesrv"].encode()), "namesrv")
    _check(dll.StartPullConsumer(handle), "StartPullConsumer")
    body_len = spec.get("body_len", {})
    start = {int(k): v for k, v in (spec.get("offsets") or {}).items()}
    queues: list[dict] = []
    try:
        mqs = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        _check(dll.FetchSubscriptionMessageQueues(handle, spec["topic"].encode(),
                                                  ctypes.byref(mqs), ctypes.byref(size)),
               "FetchSubscriptionMessageQueues")
        for i in range(size.value):
            mq = mqs[i]
            queues.append(_pull_queue(handle, mq, spec, start.get(mq.queueId, 0), body_len))
        _check(dll.ReleaseSubscriptionMessageQueue(mqs), "ReleaseSubscriptionMessageQueue")
    finally:
        dll.ShutdownPullConsumer(handle)
        dll.DestroyPullConsumer(handle)
    return {"queues": queues}


# BROKER_TIMEOUT is the client's status for a pull with no result, which a pull
# also gets when it loses the start-up race for the broker's first connection
# (cpp_logs.STARTUP_RACES): such a pull is made again, as an application would,
# up to this many times in a row; the client's logs still show every failure
PULL_TIMEOUT_TRIES = 3


def _pull_queue(handle, mq, spec: dict, offset: int, body_len: dict) -> dict:
    """Pull one queue until NO_NEW_MSG; every status and offset is recorded."""
    record = {"broker": mq.brokerName.decode(), "queue_id": mq.queueId, "start": offset,
              "statuses": [], "messages": []}
    timeouts = 0
    for _ in range(spec.get("max_rounds", 1000)):
        res = dll.Pull(handle, ctypes.byref(mq), spec.get("expression", "*").encode(),
                       ctypes.c_longlong(offset), spec.get("max_num", 32))
        status = PULL_STATUS.get(res.pullStatus, str(res.pullStatus))
        record["statuses"].append(status)
        record["min"], record["max"] = res.minOffset, res.maxOffset
        if res.pullStatus == _CPullStatus.FOUND:
            for j in range(res.size):
                record["messages"].append(_describe(res.msgFoundList[j], body_len))
        timeouts = timeouts + 1 if res.pullStatus == _CPullStatus.BROKER_TIMEOUT else 0
        if not timeouts:
            offset = res.nextBeginOffset
        dll.ReleasePullResult(res)
        if res.pullStatus == _CPullStatus.NO_NEW_MSG or timeouts >= PULL_TIMEOUT_TRIES:
            break
        if timeouts:
            time.sleep(0.1)
            continue
        if res.pullStatus == _CPullStatus.OFFSET_ILLEGAL and offset == record["start"]:
            break
    record["next"] = offset
    return record


def _emit(result: dict) -> None:
    """One JSON line to the parent, flushed: the parent reads the last one."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


OPS = {"produce": op_produce, "push": op_push, "pull": op_pull}


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    try:
        result = OPS[spec["op"]](spec)
        result["ok"] = True
    except Exception as e:  # reported to the parent, which fails the test with it
        result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    _emit(result)
    # librocketmq's static destructors have crashed at exit before; the result is out.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
