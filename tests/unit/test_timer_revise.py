"""The recount of pending timers per topic from timer-log units (revise.py)."""

from __future__ import annotations

from rmq.store.timer import layout as L
from rmq.store.timer.revise import pending_units, recount


def unit(topic: str, due: int, delete: bool = False, phy: int = 0) -> L.Unit:
    magic = L.MAGIC_DEFAULT | (L.MAGIC_DELETE if delete else 0)
    return L.Unit(L.UNIT_SIZE, -1, magic, 1000, due - 1000, phy, 100, L.java_string_hash(topic))


class File:
    def __init__(self, units: list[L.Unit], size: int) -> None:
        data = b"".join(L.pack_unit(u) for u in units)
        self.view = memoryview(bytearray(data + bytes(size - len(data))))
        self.wrote_position, self.file_size = len(data), size


def test_units_due_from_the_read_position_are_counted_by_topic():
    units = [unit("A", 5000), unit("A", 4000), unit("A", 6000, delete=True), unit("B", 7000),
             unit("B", 3000)]  # 3000 and 4000: before the read position, delivered
    files = [File(units[:3], 4 * L.UNIT_SIZE), File(units[3:], 2 * L.UNIT_SIZE)]
    got = recount(pending_units(files, 5000), ["A", "B"], lambda o, s: None)
    assert got == {"A": 0, "B": 1}  # a delete marker counts -1, as when enqueued


def test_unknown_or_shared_hash_reads_the_message():
    assert L.java_string_hash("Aa") == L.java_string_hash("BB")  # Java's classic collision
    units = [unit("Aa", 9000, phy=1), unit("BB", 9000, phy=2), unit("New", 9000, phy=3),
             unit("Gone", 9000, phy=4)]
    by_phy = {1: "Aa", 2: "BB", 3: "New", 4: None}
    read = []

    def topic_of(offset_py: int, size_py: int) -> str | None:
        read.append(offset_py)
        return by_phy[offset_py]

    got = recount([tuple(u) for u in units], ["Aa", "BB", "Old"], topic_of)
    assert got == {"Aa": 1, "BB": 1, "New": 1}
    assert read == [1, 2, 3, 4]
