"""The numpy decoders on hand-checked bytes: the spec's worked record, consume
queue fillers and terminators, commit log chains with blanks, corruption and
a magic number hidden inside a body."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from spark import storefmt
from spark.capacity import parse_size
from spark.report import percentile_from_hist


def record(topic: str, qid: int, qoff: int, phy: int, body: bytes, store_ts: int, props: bytes = b"",
           sys_flag: int = 0) -> bytes:
    """An IPv4 commit log record (STORE_FORMAT.md 2.2), for decoder tests."""
    t = topic.encode()
    size = 91 + len(body) + len(t) + len(props)
    return (struct.pack(">iiiiiqqiq", size, -626843481, zlib.crc32(body) & 0x7FFFFFFF, qid, 0, qoff, phy,
                        sys_flag, store_ts - 5)
            + bytes([10, 0, 0, 1]) + struct.pack(">iq", 50000, store_ts) + bytes([10, 0, 0, 2])
            + struct.pack(">iiqi", 10911, 0, 0, len(body)) + body + struct.pack(">b", len(t)) + t
            + struct.pack(">h", len(props)) + props)


def segment(records: list[bytes], size: int, start: int = 0, blank: bool = False) -> bytes:
    buf = bytearray(size)
    pos = 0
    for r in records:
        buf[pos:pos + len(r)] = r
        pos += len(r)
    if blank:
        buf[pos:pos + 8] = struct.pack(">ii", size - pos, -875286124)
    return bytes(buf)


def chain(specs: list[tuple[str, int, bytes]], start: int = 0) -> list[bytes]:
    out, phy, qoffs = [], start, {}
    for i, (topic, qid, body) in enumerate(specs):
        q = qoffs.get((topic, qid), 0)
        qoffs[(topic, qid)] = q + 1
        r = record(topic, qid, q, phy, body, 1_700_000_000_000 + i, b"TAGS\x01a")
        out.append(r)
        phy += len(r)
    return out


def test_spec_worked_example_record_decodes():
    """The full hex dump of STORE_FORMAT.md section 17.2."""
    rec = bytes.fromhex("""
        00 00 00 AD DA A3 20 A7 58 93 2A AC 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00 00 00 01 8B CF E5 68 00 0A 00 00 01 00 00 C3 50 00 00 01 8B CF E5 68 7B
        0A 00 00 02 00 00 2A 9F 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 02 68 69 01 54 00 4F 4B 45
        59 53 01 6B 31 02 55 4E 49 51 5F 4B 45 59 01 30 41 30 30 30 30 30 31 33 30 33 39 31 32 33 34 35
        36 37 38 30 30 30 30 45 41 36 30 30 30 30 30 02 43 4C 55 53 54 45 52 01 44 65 66 61 75 6C 74 43
        6C 75 73 74 65 72 02 54 41 47 53 01 41""")
    assert len(rec) == 173
    r = storefmt.walk_commitlog(segment([rec], 4096), 0, 4096)
    assert r.pos.tolist() == [0] and r.total_size.tolist() == [173]
    assert r.fields["storeTimestamp"].tolist() == [1700000000123]
    assert r.fields["bornTimestamp"].tolist() == [1700000000000]
    assert r.fields["bodyLength"].tolist() == [2]
    assert r.topics == ["T"] and r.issues == [] and r.data_end == 173


def test_commitlog_chain_with_blank_and_topics():
    recs = chain([("A", 0, b"x" * 10), ("Bee", 1, b"y" * 300), ("A", 0, b""), ("A", 1, b"z")], start=4096)
    r = storefmt.walk_commitlog(segment(recs, 4096, blank=True), 4096, 4096)
    assert r.pos.size == 4
    assert [r.topics[i] for i in r.topic_index] == ["A", "Bee", "A", "A"]
    assert r.fields["queueOffset"].tolist() == [0, 0, 1, 0]
    assert r.issues == []


def test_magic_inside_a_body_is_not_a_record():
    fake = record("A", 0, 0, 20, b"", 1)  # a whole record's bytes, at the wrong offset, inside a body
    recs = chain([("A", 0, b"\x00" * 16 + fake + b"tail"), ("A", 0, b"after")])
    r = storefmt.walk_commitlog(segment(recs, 2048), 0, 2048)
    assert r.pos.tolist() == [0, len(recs[0])]
    assert r.issues == []


def test_corrupt_record_is_reported_and_skipped():
    recs = chain([("A", 0, b"a" * 50), ("A", 0, b"b" * 50), ("A", 0, b"c" * 50)])
    seg = bytearray(segment(recs, 2048))
    seg[len(recs[0]) + 4] = 0  # break the second record's magic
    r = storefmt.walk_commitlog(bytes(seg), 0, 2048)
    assert r.pos.tolist() == [0, len(recs[0]) + len(recs[1])]
    assert len(r.issues) == 1 and "unreadable record" in r.issues[0][1]
    assert r.issues[0][0] == len(recs[0])


def test_truncated_commitlog_file_is_reported():
    recs = chain([("A", 0, b"a" * 50), ("A", 0, b"b" * 50)])
    seg = segment(recs, 2048)[: len(recs[0]) + 30]
    r = storefmt.walk_commitlog(seg, 0, 2048)
    assert r.pos.tolist() == [0]
    assert any("truncated" in text for _, text in r.issues)


def test_consume_queue_filler_and_end():
    entries = [(0, 0x7FFFFFFF, 0), (0, 0x7FFFFFFF, 0), (100, 120, 65), (220, 130, -5), (0, 0, 0), (999, 5, 1)]
    buf = b"".join(struct.pack(">qiq", *e) for e in entries) + bytes(20 * 4)
    cq = storefmt.decode_cq(buf, 6000, 200)
    assert cq.queue_offset.tolist() == [302, 303]
    assert cq.phy.tolist() == [100, 220] and cq.size.tolist() == [120, 130] and cq.tags.tolist() == [65, -5]
    assert cq.issues == []
    short = storefmt.decode_cq(buf[:47], 0, 200)
    assert short.phy.tolist() == [] and "truncated" in short.issues[0]


def test_index_header():
    head = struct.pack(">qqqqii", 1, 2, 3, 4, 5, 6) + bytes(100)
    assert storefmt.index_header(head) == {"beginTimestamp": 1, "endTimestamp": 2, "beginPhyOffset": 3,
                                           "endPhyOffset": 4, "hashSlotCount": 5, "indexCount": 6}
    assert storefmt.index_header(b"short") is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentile_from_histogram_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(100, 140, 1001)
    uniq, counts = np.unique(values, return_counts=True)
    assert percentile_from_hist(uniq, counts, 99) == pytest.approx(np.percentile(values, 99))


def test_parse_size():
    assert parse_size("500G") == 500 * 2**30
    assert parse_size("1.5T") == int(1.5 * 2**40)
    assert parse_size("4096") == 4096
    with pytest.raises(ValueError):
        parse_size("lots")
