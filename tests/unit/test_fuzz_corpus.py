"""Replay the committed fuzz corpus (fuzz/corpus/<target>/) through every target.

The seeds are valid inputs of each format and the ``crash-*`` files are inputs
the fuzzer once crashed a decoder with: each must now be refused with the
decoder's own error, and the compiled decoders must agree with their twins
(fuzz/targets.py).  ``make fuzz`` searches for new ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.targets import TARGETS

pytestmark = pytest.mark.timeout(60)

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "corpus"


def test_every_target_has_seeds():
    for name in TARGETS:
        assert any((CORPUS / name).iterdir()), f"no seeds for {name}"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_corpus_replays_cleanly(name):
    files = sorted((CORPUS / name).iterdir())
    for f in files:
        TARGETS[name](f.read_bytes())


def test_seeds_are_accepted_inputs():
    """The seeds start the search inside each format: the decoders accept them."""
    import zlib

    from rmq.acl.plain_config import load_yaml, mapping_of, parse_rules
    from rmq.broker.processor.client_manage import decode_heartbeat
    from rmq.common.topic_config import RegisterBrokerBody
    from rmq.filter.parser import parse

    for f in (CORPUS / "heartbeat").glob("seed-*"):
        assert decode_heartbeat(f.read_bytes()).client_id
    for f in (CORPUS / "register_broker").glob("seed-*"):
        data = f.read_bytes()
        compressed = data[0] & 1 == 1
        body = zlib.compress(data[1:]) if compressed else data[1:]
        assert RegisterBrokerBody.decode(body, compressed).topicConfigSerializeWrapper.topicConfigTable
    for f in (CORPUS / "sql92").glob("seed-*"):
        parse(f.read_text())
    for f in (CORPUS / "plain_acl").glob("seed-*"):
        assert parse_rules("x.yml", mapping_of(load_yaml(f.read_text(), "x.yml"), "x.yml")).accounts
    from fuzz.targets import TwinPopLane, _PopSupport

    for f in (CORPUS / "pop_frames").glob("seed-*"):
        data = f.read_bytes()
        taken, _ = TwinPopLane(_PopSupport(), 1 << 20).serve(None, data, 0, len(data))
        assert taken > 0  # the pop lane takes its first frame at least


def test_fastjson_refuses_deep_nesting():
    from rmq.common import fastjson

    deep = "{a:" * 5000 + "1" + "}" * 5000  # lenient syntax: orjson refuses, fastjson reads
    with pytest.raises(ValueError, match="nested deeper"):
        fastjson.loads(deep)
    assert fastjson.loads("{a:" * 50 + "1" + "}" * 50)


@pytest.mark.parametrize("escape", ["\\x-1", "\\u-001", "\\u 01a", "\\u+01a", "\\x_1",
                                    "\\ud800\\u-001"])
def test_fastjson_escapes_need_hex_digits(escape):
    from rmq.common import fastjson

    text = "{a:'" + escape + "'}"
    if escape.startswith("\\ud800"):  # a high surrogate followed by a bad escape: kept alone
        with pytest.raises(ValueError, match="bad"):
            fastjson.loads(text)
        return
    with pytest.raises(fastjson.FastjsonError, match="bad"):
        fastjson.loads(text)


def test_scan_record_too_short_for_its_ipv6_hosts():
    """A record whose size fits IPv4 hosts but whose sysFlag says IPv6: a
    corrupt record to both scanners (the compiled one read past its end)."""
    import struct

    from rmq._fast import compiled_or_none
    from rmq.store import message_codec as mc

    for flags in (0x10, 0x20, 0x30):
        rec = bytearray(struct.pack(">iiiiiqqi", 100, mc.MESSAGE_MAGIC_CODE, 0, 0, 0, 0, 0, flags))
        rec += bytes(100 - len(rec))
        want = (mc.SCAN_SIZE_MISMATCH, 100)
        assert mc._scan_record(rec, 0, len(rec), False)[:2] == want
        c = compiled_or_none("store_codec")
        if c is not None:
            assert c.scan_record(rec, 0, len(rec), False)[:2] == want


@pytest.mark.parametrize("text", ["(" * 61 + "a > 1" + ")" * 61, "NOT " * 61 + "a > 1",
                                  "a = 1" + " = TRUE" * 200,
                                  " OR ".join(f"a = {i}" for i in range(201))])
def test_sql92_refuses_selectors_nested_too_deep(text):
    """Found by fuzzing: a chain of 300 '=' compiled, then printing its error hit
    the recursion limit; deep selectors are now a FilterError."""
    from rmq.filter.expression import FilterError
    from rmq.filter.parser import parse

    with pytest.raises(FilterError, match="Expression"):
        parse(text)


def test_sql92_long_but_shallow_selectors_still_compile():
    from rmq.filter.parser import parse

    expr = parse(" OR ".join(f"a = {i}" for i in range(150)))
    assert expr.matches({"a": 149}) and not expr.matches({"a": 150})
    assert parse("(" * 60 + "a > 1" + ")" * 60).matches({"a": 2})
