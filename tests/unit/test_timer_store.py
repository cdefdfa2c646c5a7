"""The timer store's files byte for byte as RocketMQ 5.3.3 writes them (the
golden bytes follow the putInt/putLong sequences of TimerMessageStore.doEnqueue,
TimerLog.append, TimerWheel.putSlot and TimerCheckpoint.flush), the put hook's
rules (HookUtils.transformTimerMessage), and delivery exactly once after a
round cut short, with a real DefaultMessageStore."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from rmq.common import message as mc
from rmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)
from rmq.store.message_codec import message_properties_to_string
from rmq.store.timer import TimerMessageStore
from rmq.store.timer import layout as L
from rmq.store.timer.checkpoint import TimerCheckpoint
from rmq.store.timer.hook import TimerPutHook, parse_java_long, requested_due_ms, round_due
from rmq.store.timer.timer_log import TimerLog
from rmq.store.timer.wheel import TimerWheel
from rmq.testing.wait import wait_until

pytestmark = pytest.mark.timeout(60)


# ---- golden layouts -------------------------------------------------------------------
def test_unit_bytes_follow_do_enqueue():
    u = L.Unit(52, 0x0102030405060708, 3, 1_700_000_000_000, 5000, 0x1122334455667788, 300,
               L.java_string_hash("TopicA"), 0)
    b = L.pack_unit(u)
    assert len(b) == L.UNIT_SIZE == 52
    assert b.hex() == (
        "00000034" "0102030405060708" "00000003" "0000018bcfe56800" "00001388"
        "1122334455667788" "0000012c" + (L.java_string_hash("TopicA") & 0xFFFFFFFF).to_bytes(4, "big").hex()
        + "0000000000000000")
    assert L.unpack_unit(b) == u and u.delayed_time_ms == 1_700_000_005_000
    # UNIT_PRE_SIZE_FOR_MSG: where offsetPy starts
    assert int.from_bytes(b[L.UNIT_PRE_SIZE_FOR_MSG:L.UNIT_PRE_SIZE_FOR_MSG + 8], "big") == 0x1122334455667788


def test_java_constants():
    assert L.BLANK_MAGIC_CODE == -0x342BCE6C  # 0xBBCCDDEE ^ (1880681586 + 8) as a Java int
    assert L.pack_blank(44).hex() == "0000002c" "0000000000000000" "cbd43194"
    assert L.WHEEL_LENGTH == 7 * 86400 * 2 * 32 == 38_707_200
    assert L.java_string_hash("abc") == 96354
    assert L.java_string_hash("rmq_sys_wheel_timer_XXXXXXXXXXXXXXXX") < 0  # overflow wraps like Java
    assert L.is_magic_ok(7) and not L.is_magic_ok(0x10)


def test_slot_and_checkpoint_bytes():
    assert L.pack_slot(1_700_000_000_123, 1000, 52, 104, 2, 0).hex() == (
        "000000006553f100" "0000000000000034" "0000000000000068" "00000002" "00000000")
    assert L.slot_index(1_700_000_000_123, 1000) == 1_700_000_000 % (2 * 604800)
    cp = L.pack_checkpoint(L.CheckpointFields(1, 2, 3, 4, 5, 6, 7))
    assert cp == b"".join(i.to_bytes(8, "big") for i in range(1, 8))


def test_wheel_file_round_trip(tmp_path):
    w = TimerWheel(str(tmp_path / "timerwheel"), 100)
    t = 1_700_000_000_150
    assert w.get_slot(t) == L.EMPTY_SLOT
    w.put_slot(t, 52, 104, 2, 0)
    assert w.get_slot(t) == L.Slot(1_700_000_000_100, 52, 104, 2, 0)
    assert w.get_slot(t + 2 * 604800 * 100) == L.EMPTY_SLOT  # the same index, another time
    w.revise_slot(t, -2, 156, True)
    assert w.get_slot(t).last_pos == 156 and w.get_slot(t).first_pos == 52
    w.close()
    raw = open(tmp_path / "timerwheel", "rb").read()
    assert len(raw) == L.WHEEL_LENGTH
    pos = L.slot_index(t, 100) * 32
    assert raw[pos:pos + 32] == L.pack_slot(t, 100, 52, 156, 2, 0)
    with pytest.raises(ValueError, match="Timer wheel length"):
        (tmp_path / "bad").write_bytes(b"x" * 10)
        TimerWheel(str(tmp_path / "bad"), 100)


def test_a_wheel_page_is_reserved_before_its_first_slot(tmp_path, no_space):
    """The wheel is sparse (as 5.3.3's) and written at any slot: a page's
    block is reserved before its first slot is written, and a disk without
    room refuses the slot with nothing written (no SIGBUS).  A reopened
    wheel knows the pages it holds."""
    path = tmp_path / "timerwheel"
    w = TimerWheel(str(path), 100)
    t = 1_700_000_000_150
    assert os.stat(path).st_blocks == 0
    assert w.put_slot(t, 52, 104, 1, 0)
    assert os.stat(path).st_blocks * 512 == 4096  # the slot's page, not the 38.7 MB
    no_space["full"] = True
    far = t + 3_600_000  # another page
    assert w.put_slot(t + 100, 104, 156, 1, 0)  # the same page: reserved already
    assert not w.put_slot(far, 156, 208, 1, 0)
    assert w.get_slot(far) == L.EMPTY_SLOT
    no_space["full"] = False
    assert w.put_slot(far, 156, 208, 1, 0) and w.get_slot(far).last_pos == 208
    w.close()
    again = TimerWheel(str(path), 100)
    page = L.slot_index(far, 100) * 32 // 4096
    assert sum(again.reserved) == 2 and again.reserved[page] == 1
    again.close()


def test_timer_log_rolls_with_a_blank(tmp_path):
    log = TimerLog(str(tmp_path / "timerlog"), 200)
    unit = L.pack_unit(L.Unit(52, -1, 1, 0, 0, 0, 10, 0, 0))
    assert [log.append(unit) for _ in range(4)] == [0, 52, 104, 200]
    first = open(tmp_path / "timerlog" / ("0" * 20), "rb").read()
    assert first[156:172] == L.pack_blank(44)
    assert sorted(os.listdir(tmp_path / "timerlog")) == ["0" * 20, f"{200:020d}"]
    assert log.offset_for_last_unit() == 200 - (200 - 16) % 52 - 16 - 52


def test_checkpoint_fields_and_marker_outside_5_3_3_bytes(tmp_path):
    cp = TimerCheckpoint(str(tmp_path / "timercheck"))
    cp.set_read_time(1000)
    cp.set_queue_offset(7)
    cp.set_marker(L.Marker(True, 900, 12345))
    cp.flush()
    raw = open(tmp_path / "timercheck", "rb").read()
    assert len(raw) == 4096
    f = L.unpack_checkpoint(raw)
    assert (f.last_read_time_ms, f.last_timer_queue_offset, f.master_timer_queue_offset) == (1000, 7, 7)
    assert raw[56:512] == bytes(456)  # 5.3.3's part ends at 56; rmq's marker starts at 512
    assert L.unpack_marker(raw) == L.Marker(True, 900, 12345)
    assert TimerCheckpoint(str(tmp_path / "timercheck")).last_read_time_ms == 1000


# ---- the put hook -----------------------------------------------------------------------
def test_hook_rules():
    assert round_due(1_700_000_000_500, 1000) == 1_700_000_000_000
    assert round_due(1_700_000_001_000, 1000) == 1_700_000_000_000  # a boundary: the slot before
    assert parse_java_long("-5") == -5 and parse_java_long(" 5") is None
    assert parse_java_long("9223372036854775808") is None
    assert requested_due_ms({"TIMER_DELAY_SEC": "2", "TIMER_DELAY_MS": "5"}, 1000) == 3000
    assert requested_due_ms({"TIMER_DELAY_MS": "5", "TIMER_DELIVER_MS": "1"}, 1000) == 1005
    assert requested_due_ms({"TIMER_DELIVER_MS": "x"}, 1000) is None


def _msg(topic: str, props: dict[str, str], body: bytes = b"b") -> MessageExtBrokerInner:
    props = dict(props)
    return MessageExtBrokerInner(topic, 1, 0, body, props, message_properties_to_string(props),
                                 0, 0, int(time.time() * 1000))


def test_hook_parks_refuses_and_leaves_alone():
    cfg = MessageStoreConfig(timerMaxDelaySec=10)
    hook = TimerPutHook(cfg)
    m = _msg("T", {"TIMER_DELAY_MS": "5000"})
    assert hook(m) is None
    assert m.topic == "rmq_sys_wheel_timer" and m.queue_id == 0
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "1"
    assert int(m.properties["TIMER_OUT_MS"]) % 1000 == 0
    assert "TIMER_OUT_MS\x01" in m.properties_string
    assert hook(_msg("T", {"TIMER_DELAY_SEC": "11"})) is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    past = _msg("T", {"TIMER_DELIVER_MS": "1"})
    assert hook(past) is None and past.topic == "T"
    lvl = _msg("T", {"TIMER_DELAY_MS": "5000", "DELAY": "2"})
    assert hook(lvl) is None and lvl.topic == "T" and "TIMER_DELAY_MS" not in lvl.properties_string
    half = _msg("RMQ_SYS_TRANS_HALF_TOPIC", {"TIMER_DELAY_MS": "5000"})
    assert hook(half) is None and half.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    off = TimerPutHook(MessageStoreConfig(timerWheelEnable=False))
    assert off(_msg("T", {"TIMER_DELAY_MS": "5"})) is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE


# ---- the wheel at work, and a round cut short ---------------------------------------------
def _store(root) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=6000 * 20, timerPrecisionMs=100,
                             mappedFileSizeTimerLog=64 * 1024)
    s = DefaultMessageStore(cfg, ("127.0.0.1", 10911))
    assert s.load()
    s.start()
    return s


def _delivered(store: DefaultMessageStore, topic: str) -> list:
    cq = store._existing_cq(topic, 1)
    out = []
    i = 0
    while cq is not None and (e := cq.read_entry(i)) is not None:
        out.append(store.look_message_by_offset(e[0]))
        i += 1
    return out


def test_slot_delivered_once_after_a_cut(tmp_path):
    async def scenario() -> None:
        store = _store(tmp_path)
        timer = TimerMessageStore(store, store.config)
        timer.load()
        due = (int(time.time() * 1000) // 100 + 4) * 100 + 50
        n = 1500
        for i in range(n):
            m = _msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": f"{i:032X}"}, b"%d" % i)
            assert store.put_message(m).status is PutMessageStatus.PUT_OK
        store.do_reput()
        assert await timer._enqueue_round() == 1024 and await timer._enqueue_round() == n - 1024
        slot = timer.wheel.get_slot(due)
        assert slot.num == n and timer.metrics.count("Real") == n
        while time.time() * 1000 < due // 100 * 100 + 100:
            await asyncio.sleep(0.01)
        task = asyncio.ensure_future(timer._deliver_slot(due // 100 * 100, slot))
        while len(_delivered(store, "Real")) < 600:  # cut after the second yield
            store.do_reput()
            await asyncio.sleep(0)
        task.cancel()  # what a kill at that moment leaves: the marker is still set
        await asyncio.gather(task, return_exceptions=True)
        assert timer.cp.marker().active
        got = len(_delivered(store, "Real"))
        assert 0 < got < n
        # a new process: recovery reads the marker and the commit log behind it
        again = TimerMessageStore(store, store.config)
        again.load()
        assert sum(again.skip.values()) == got
        await again._deliver_due()
        store.do_reput()
        bodies = [m.body for m in _delivered(store, "Real")]
        assert sorted(bodies) == sorted(b"%d" % i for i in range(n))
        first = _delivered(store, "Real")[0]
        assert first.properties["TIMER_OUT_MS"] == str(due // 100 * 100)
        assert first.store_timestamp >= due
        assert not again.cp.marker().active
        store.shutdown()

    asyncio.run(scenario())


def _timers_due(tmp_path, n: int):
    """A store with ``n`` timer messages to Real, all due in a minute, not yet
    enqueued, and its timer store loaded: (store, timer, due)."""
    store = _store(tmp_path)
    timer = TimerMessageStore(store, store.config)
    timer.load()
    # off a slot boundary: a due time on one belongs to the slot before (round_due)
    due = (int(time.time() * 1000) // 100 + 600) * 100 + 50
    for i in range(n):
        store.put_message(_msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": str(i)}))
    store.do_reput()
    return store, timer, due


def test_enqueue_position_comes_back_from_the_log(tmp_path):
    async def scenario() -> None:
        store, timer, due = _timers_due(tmp_path, 10)
        await timer._enqueue_round()
        timer.cp.set_queue_offset(3)  # as if killed before the position was written
        again = TimerMessageStore(store, store.config)
        again.load()
        assert again.queue_offset == 10  # no unit appended twice
        assert again.wheel.get_slot(due // 100 * 100).num == 10
        store.shutdown()

    asyncio.run(scenario())


def test_an_entry_without_room_for_its_slot_is_taken_again_later(tmp_path, no_space):
    """A full disk refuses a timer entry's slot page: the entry is not
    passed over (no unit appended, the queue position kept) and is enqueued
    once there is room."""
    async def scenario() -> None:
        store, timer, due = _timers_due(tmp_path, 3)
        no_space["full"] = True
        assert await timer._enqueue_round() == 0
        assert timer.queue_offset == 0 and timer.log.mfq.get_max_wrote_position() == 0
        assert timer.wheel.get_slot(due // 100 * 100) == L.EMPTY_SLOT
        no_space["full"] = False
        assert await timer._enqueue_round() == 3
        assert timer.queue_offset == 3 and timer.wheel.get_slot(due // 100 * 100).num == 3
        store.shutdown()

    asyncio.run(scenario())


def test_timer_properties_leave_the_fast_paths():
    from rmq.store.message_codec import fast_send_properties, has_timer_property
    text = "TIMER_DELIVER_MS\x011234\x02UNIQ_KEY\x01AB"
    assert fast_send_properties(text, "C")[3] is True
    assert fast_send_properties("UNIQ_KEY\x01AB", "C")[3] is False
    assert has_timer_property(b"A\x01b\x02TIMER_DELAY_MS\x015") and not has_timer_property(b"A\x01TIMER_")
    assert mc.PROPERTY_REAL_TOPIC == "REAL_TOPIC"


def test_refused_timer_commit_is_answered_as_5_3_3():
    from rmq.broker.processor.end_transaction import send_final_response
    from rmq.store import PutMessageResult

    cfg = MessageStoreConfig(timerMaxDelaySec=10, timerCongestNumEachSlot=5)
    r = send_final_response(PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL), 1024, cfg)
    assert r.code == 13 and "max delay 10000ms" in r.remark
    r = send_final_response(PutMessageResult(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL), 1024, cfg)
    assert r.code == 1 and "max num limit is 10 or the current value is greater than 5" in r.remark
    r = send_final_response(PutMessageResult(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE), 1024, cfg)
    assert r.code == 1 and r.remark.endswith("timerWheelEnable is true")


def test_timer_beyond_the_roll_window_is_parked_again_then_delivered_on_time(tmp_path):
    async def scenario() -> None:
        timer: list = []
        cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20,
                                 mappedFileSizeConsumeQueue=6000, timerPrecisionMs=100,
                                 mappedFileSizeTimerLog=64 * 1024, timerRollWindowSlot=3)
        store = DefaultMessageStore(cfg, ("127.0.0.1", 10911),
                                    message_arriving_listener=lambda t, *a: timer[0].on_message_arriving(t))
        assert store.load()
        store.start()
        timer.append(TimerMessageStore(store, cfg))
        timer[0].load()
        await timer[0].start()
        due = int(time.time() * 1000) + 1250
        assert store.put_message(_msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": "R1"})
                                 ).status is PutMessageStatus.PUT_OK
        await wait_until(lambda: _delivered(store, "Real"), 5, 0.01, "delivered")
        (m,) = _delivered(store, "Real")
        assert int(m.properties["TIMER_ROLL_TIMES"]) >= 2  # 300 ms windows up to 1.25 s
        assert due <= m.store_timestamp <= due + 100 + 200
        await timer[0].shutdown()
        store.shutdown()

    asyncio.run(scenario())


def test_a_delete_timer_cancels_its_target(tmp_path):
    async def scenario() -> None:
        store = _store(tmp_path)
        timer = TimerMessageStore(store, store.config)
        timer.load()
        # (a second ahead: a delete timer already due is refused, and the three
        # puts of a first store under load took over 200 ms once)
        due = (int(time.time() * 1000) // 100 + 10) * 100 + 20
        keep = _msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": "KEEP"}, b"keep")
        gone = _msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": "GONE"}, b"gone")
        cancel = _msg("Real", {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": "DEL",
                               "TIMER_DEL_UNIQKEY": "Real+GONE"}, b"")
        for m in (keep, gone, cancel):
            assert store.put_message(m).status is PutMessageStatus.PUT_OK
        await timer._enqueue_round()
        slot = timer.wheel.get_slot(due)
        assert slot.num == 1  # two timers, one delete (5.3.3 counts it as -1)
        while time.time() * 1000 < due // 100 * 100 + 100:
            await asyncio.sleep(0.01)
        await timer._deliver_due()
        assert [m.body for m in _delivered(store, "Real")] == [b"keep"]
        store.shutdown()

    asyncio.run(scenario())
