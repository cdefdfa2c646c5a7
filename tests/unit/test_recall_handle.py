"""RecallMessageHandle v1 of 5.3.3: base64url of "v1 topic broker due uniqKey"."""

import base64

import pytest

from rmq.common.timer import decode_recall_handle, encode_recall_handle


def test_round_trip_and_layout():
    handle = encode_recall_handle("T", "broker-a", 1_700_000_001_001, "ID1")
    assert base64.urlsafe_b64decode(handle) == b"v1 T broker-a 1700000001001 ID1"
    assert decode_recall_handle(handle) == ("T", "broker-a", "1700000001001", "ID1")
    # Java's URL decoder takes the handle without its padding too
    assert decode_recall_handle(handle.rstrip("=")) == ("T", "broker-a", "1700000001001", "ID1")


@pytest.mark.parametrize("handle", ["", "!!!", base64.urlsafe_b64encode(b"v2 T b 1 x").decode(),
                                    base64.urlsafe_b64encode(b"v1 T b 1").decode(),
                                    base64.urlsafe_b64encode(b"\xff\xfe").decode()])
def test_invalid_handles(handle):
    with pytest.raises(ValueError, match="recall handle is invalid"):
        decode_recall_handle(handle)
