"""A POP_MESSAGE's extFields read by the compiled ``pop_header`` and by its
twin (``rmq.broker.processor.pop._pop_header``): the same values of the same
types for every header either takes, the same remark for every header they
refuse.  Checked on clients' headers and on thousands of mutated ones
(fields dropped, emptied, given odd numbers, spaces, signs, other digits,
other types)."""

from __future__ import annotations

import random

import pytest

from rmq._fast import compiled_or_none
from rmq.broker.processor.pop import _pop_header

pytestmark = pytest.mark.compiled_only

C_HEADER = compiled_or_none("pop_header")

BASE = {"consumerGroup": "g_pop", "topic": "TopicA", "queueId": "-1", "maxMsgNums": "32",
        "invisibleTime": "60000", "pollTime": "15000", "bornTime": "1764300000000",
        "initMode": "0", "expType": "TAG", "exp": "*", "order": "false"}
FIELDS = ["consumerGroup", "topic", "queueId", "maxMsgNums", "invisibleTime", "pollTime",
          "bornTime", "initMode", "order", "expType", "exp"]
ODD_VALUES = ["", "0", "-0", "-", "+5", " 5", "5 ", "1_000", "007", "٣", "1e3", "1.5", "0x10",
              "999999999999999999", "-999999999999999999", "1000000000000000000",
              "12345678901234567890123", "-9223372036854775809", "true", "TRUE", "True",
              "tRuE", "false", "yes", "é", "\x00", "5\n", "ｔｒｕｅ", "−5", None, 7, -3, True,
              False, 2.5, 10**20]


def _same(ext: dict) -> None:
    want = _pop_header(ext)
    got = C_HEADER.pop_header(ext)
    assert got == want and type(got) is type(want), ext
    if type(want) is tuple:
        assert [type(v) for v in got] == [type(v) for v in want], ext


@pytest.mark.skipif(C_HEADER is None, reason="not built")
def test_pop_header_reads_what_the_twin_reads():
    _same(BASE)
    _same({k: v for k, v in BASE.items() if k not in ("pollTime", "bornTime", "initMode",
                                                       "order", "expType", "exp")})
    for name in FIELDS:
        _same({k: v for k, v in BASE.items() if k != name})
        for value in ODD_VALUES:
            _same({**BASE, name: value})
    rnd = random.Random(37)
    for _ in range(6000):
        ext = dict(BASE)
        for _ in range(rnd.randint(1, 4)):
            name = rnd.choice(FIELDS)
            r = rnd.random()
            if r < 0.15:
                ext.pop(name, None)
            elif r < 0.5:
                ext[name] = rnd.choice(ODD_VALUES)
            else:
                text = str(ext.get(name) or "12")
                i = rnd.randrange(len(text) + 1)
                ext[name] = text[:i] + rnd.choice("0123456789-+ _.eé٣\x00") + text[i + 1:]
        _same(ext)


@pytest.mark.skipif(C_HEADER is None, reason="not built")
def test_pop_header_remarks():
    assert C_HEADER.pop_header({**BASE, "topic": ""}) == "the custom field topic is null"
    assert C_HEADER.pop_header({**BASE, "maxMsgNums": "3x"}) == \
        "the custom field maxMsgNums is not a number: 3x"
    got = C_HEADER.pop_header({**BASE, "order": "TRUE", "initMode": "1"})
    assert got[7] == 1 and got[8] is True and got[3] == 32 and got[2] == -1


@pytest.mark.skipif(C_HEADER is None, reason="not built")
def test_pop_header_finds_the_fields_by_their_whole_names():
    """The compiled reader walks the items once: keys of a name's length and
    first letter, other and non-ASCII keys are no field, and a key of another
    type (a str subclass equal to a name) has the fields looked up as the
    twin's ``dict.get`` does."""

    class Key(str):
        pass

    near = {"topiX": "x", "qxxxxxx": "1", "pollTimf": "5", "c" * 13: "g", "eee": "q",
            "tópic": "t", "": "0", "maxMsgNumz": "1", "orde": "true", "xTime": "1"}
    _same({**BASE, **near})
    for name in FIELDS:
        ext = {k: v for k, v in BASE.items() if k != name}
        _same({**ext, **near})
        _same({**ext, Key(name): BASE[name]})
        _same({**ext, Key(name): None})
    _same({Key("other"): "1", **BASE})
    _same({1: "x", **BASE})
