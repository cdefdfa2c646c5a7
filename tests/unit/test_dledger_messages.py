"""DLedger's typed request and response bodies (rmq.dledger.messages): each
reads back what it writes, a field of the wrong kind is refused, and the
JSON names are the Java getters'."""

from __future__ import annotations

import pytest

from rmq.dledger.entry import Entry
from rmq.dledger.messages import (
    REQUEST_OF,
    RESPONSE_OF,
    AppendEntryRequest,
    LeadershipTransferRequest,
    MetadataResponse,
    PushEntryRequest,
    VoteRequest,
    base,
    failure,
)
from rmq.dledger.protocol import JavaHashMap, PushType, RequestCode, decode, encode

pytestmark = pytest.mark.timeout(30)


def _sample(cls):
    """A body of ``cls`` with every field away from its default."""
    body = base(cls, "g", "n1", "n0", "n1", 7, code=404)
    extra = {VoteRequest: dict(ledger_end_index=9, ledger_end_term=6),
             AppendEntryRequest: dict(body=b"\x00hi\xff"),
             LeadershipTransferRequest: dict(take_leadership_ledger_index=3, transfer_id="n1",
                                             transferee_id="n2"),
             MetadataResponse: dict(peers=JavaHashMap({"n0": "h:1", "n1": "h:2"})),
             PushEntryRequest: dict(type=PushType.APPEND, commit_index=4,
                                    batch_entry=[Entry(5, 7, b"a", 0), Entry(6, 7, b"bc", 49)])}
    for name, value in extra.get(cls, {}).items():
        setattr(body, name, value)
    return body


@pytest.mark.parametrize("cls", sorted({*REQUEST_OF.values(), *RESPONSE_OF.values()},
                                       key=lambda c: c.__name__))
def test_every_body_reads_back_what_it_writes(cls):
    body = _sample(cls)
    again = cls.from_json(decode(encode(body)))
    assert encode(again) == encode(body)
    assert again.group == "g" and again.remote_id == "n0" and again.term == 7 and again.code == 404


def test_a_push_writes_the_getters_of_its_entries():
    obj = decode(encode(_sample(PushEntryRequest)))
    assert (obj["batch"], obj["count"], obj["firstEntryIndex"], obj["lastEntryIndex"],
            obj["totalSize"], obj["commitIndex"], obj["type"]) == (True, 2, 5, 6, 48 * 2 + 3, 4,
                                                                   "APPEND")
    assert "entry" not in obj and [e["index"] for e in obj["batchEntry"]] == [5, 6]
    assert PushEntryRequest.from_json(obj).entries()[1].body == b"bc"


def test_a_field_of_the_wrong_kind_is_refused():
    with pytest.raises(ValueError):
        VoteRequest.from_json({"term": "seven", "group": "g"})


def test_missing_fields_take_their_java_defaults_and_unknown_ones_are_ignored():
    vote = VoteRequest.from_json({"group": "g", "nodeId": "x"})
    assert (vote.term, vote.code, vote.ledger_end_index, vote.leader_id) == (-1, 200, -1, None)
    assert encode(failure(vote, 401, "n1", RequestCode.VOTE)) == \
        b'{"code":401,"group":"g","leaderId":"n1","term":-1,"voteResult":"UNKNOWN"}'
