"""One call per message for the index keys (``index_keys``): the compiled
module and the twin write the same bytes as inserting ``topic#key`` one key
at a time, and ``IndexService.build_index`` rolls to a new file exactly as
the per-key insert did."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.store import index as idx
from rmq.store.checkpoint import StoreCheckpoint

IDX = compiled_or_none("store_index")
IMPLS = [idx._index_keys] + ([IDX.index_keys] if IDX is not None else [])

SLOTS, ENTRIES = 16, 12


def _fresh(slots: int = SLOTS, entries: int = ENTRIES, end_phy: int = 0) -> bytearray:
    buf = bytearray(idx.index_file_size(slots, entries))
    idx._HEADER.pack_into(buf, 0, 0, 0, end_phy, end_phy, 0, 1)
    return buf


def _tokens(uniq: str | None, keys: str | None) -> list[str]:
    out = [uniq] if uniq else []
    if keys:
        out.extend(k for k in keys.split(" ") if k)
    return out


def _reference(buf, topic: str, phy: int, ts: int, uniq, keys, start: int = 0) -> int:
    """The per-key insert that build_index made before (key string, hash, put)."""
    end_phy, count = idx._HEADER.unpack_from(buf, 0)[3], idx._HEADER.unpack_from(buf, 0)[5]
    if max(count, 1) >= ENTRIES:
        return start
    if phy < end_phy:
        return -1
    todo = _tokens(uniq, keys)
    for n in range(start, len(todo)):
        if not idx._index_put(buf, SLOTS, ENTRIES, idx._key_hash(f"{topic}#{todo[n]}"), phy, ts):
            return n
    return -1


KEY_TEXT = st.text(alphabet=st.sampled_from("ab Z#9 \u00e9\u4e2d\U0001f600 "), max_size=12)


@settings(max_examples=150, deadline=None)
@given(msgs=st.lists(st.tuples(st.none() | KEY_TEXT, st.none() | KEY_TEXT), max_size=8),
       topic=st.sampled_from(["T", "BenchTopic", "t\u00fcpic", "\U0001f600x"]))
def test_index_keys_identical_to_per_key_insert(msgs, topic):
    expect = _fresh()
    results = []
    for i, (uniq, keys) in enumerate(msgs):
        results.append(_reference(expect, topic, 100 * (i + 1), 1_700_000_000_000 + i, uniq, keys))
    for impl in IMPLS:
        buf = _fresh()
        got = [impl(buf, SLOTS, ENTRIES, topic, 100 * (i + 1), 1_700_000_000_000 + i, uniq, keys, 0)
               for i, (uniq, keys) in enumerate(msgs)]
        assert got == results
        assert buf == expect


@pytest.mark.parametrize("impl", IMPLS)
def test_index_keys_full_file_resume_and_covered_offsets(impl):
    buf = _fresh(entries=3)  # entries 1 and 2 usable
    # two keys fit, the third (number 2) does not
    assert impl(buf, SLOTS, 3, "T", 500, 1000, "u1", "k1 k2", 0) == 2
    assert idx._HEADER.unpack_from(buf, 0)[5] == 3
    # a full file refuses from the key the caller resumes at
    full = bytes(buf)
    assert impl(buf, SLOTS, 3, "T", 600, 1000, "u2", None, 0) == 0
    assert impl(buf, SLOTS, 3, "T", 600, 1000, "u2", "a b", 2) == 2
    assert buf == full
    # a fresh file resumes at that key and skips the ones already written
    nxt = _fresh(entries=3, end_phy=500)
    assert impl(nxt, SLOTS, 3, "T", 500, 1000, "u1", "k1 k2", 2) == -1
    assert idx._HEADER.unpack_from(nxt, 0)[5] == 2
    assert idx.index_get(nxt, SLOTS, 3, idx.key_hash("T#k2"), 0, 2**62, 8) == [500]
    assert idx.index_get(nxt, SLOTS, 3, idx.key_hash("T#u1"), 0, 2**62, 8) == []
    # an offset below the file's end is already indexed: nothing written
    covered = _fresh(end_phy=900)
    assert impl(covered, SLOTS, ENTRIES, "T", 899, 1000, "u", "k", 0) == -1
    assert covered == _fresh(end_phy=900)
    # no key at all: done, nothing written
    empty = _fresh()
    assert impl(empty, SLOTS, ENTRIES, "T", 1, 1, None, "   ", 0) == -1
    assert impl(empty, SLOTS, ENTRIES, "T", 1, 1, "", "", 0) == -1
    assert empty == _fresh()


@pytest.mark.parametrize("impl", IMPLS)
def test_index_keys_bad_buffer(impl):
    with pytest.raises((ValueError, TypeError, BufferError)):
        impl(bytearray(100), SLOTS, ENTRIES, "T", 1, 1, "u", None, 0)


def _destroy(svc: idx.IndexService) -> None:
    for t in threading.enumerate():  # full files are forced in the background
        if t.name == "IndexFileFlush":
            t.join(10)
    svc.destroy()


def _service(tmp_path, name: str) -> idx.IndexService:
    cp = StoreCheckpoint(str(tmp_path / f"checkpoint-{name}"))
    return idx.IndexService(str(tmp_path / name), SLOTS, 5, cp, 64)


@pytest.mark.parametrize("impl", IMPLS)
def test_build_index_rolls_files_like_the_per_key_insert(tmp_path, monkeypatch, impl):
    """Messages with 0-3 keys into files of 4 entries: the files written by
    build_index hold the bytes the old one-key-at-a-time insert wrote."""
    monkeypatch.setattr(idx, "index_keys", impl)
    svc = _service(tmp_path, "new")
    msgs = [(f"U{i}", " ".join(f"k{i}_{j}" for j in range(i % 4))) for i in range(20)]
    for i, (uniq, keys) in enumerate(msgs):
        assert svc.build_index("Topic", 64 * i, 1_700_000_000_000 + 10 * i, keys, uniq)
    # the same keys one at a time, rolling into a new buffer when one is full
    files = [_fresh(entries=5)]
    for i, (uniq, keys) in enumerate(msgs):
        for k in _tokens(uniq, keys):
            h = idx._key_hash(f"Topic#{k}")
            if not idx._index_put(files[-1], SLOTS, 5, h, 64 * i, 1_700_000_000_000 + 10 * i):
                last = idx._HEADER.unpack_from(files[-1], 0)
                nxt = bytearray(idx.index_file_size(SLOTS, 5))
                idx._HEADER.pack_into(nxt, 0, last[1], last[1], last[3], last[3], 0, 1)
                files.append(nxt)
                assert idx._index_put(nxt, SLOTS, 5, h, 64 * i, 1_700_000_000_000 + 10 * i)
    assert [bytes(f.mf.view) for f in svc.files] == [bytes(b) for b in files]
    assert svc.query_offset("Topic", "k19_2", 8, 0, 2**62)[0] == [64 * 19]
    assert svc.query_offset("Topic", "U7", 8, 0, 2**62)[0] == [64 * 7]
    _destroy(svc)


@pytest.mark.parametrize("impl", IMPLS)
def test_build_index_fails_when_a_key_never_fits(tmp_path, monkeypatch, impl):
    monkeypatch.setattr(idx, "index_keys", impl)
    cp = StoreCheckpoint(str(tmp_path / "cp"))
    svc = idx.IndexService(str(tmp_path / "one"), SLOTS, 1, cp, 64)  # no entry ever fits
    assert not svc.build_index("T", 0, 1, None, "u")
    _destroy(svc)
