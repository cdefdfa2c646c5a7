"""The SQL92 bloom filter: Guava's murmur3_128 and 4.9.8's k, m, positions and bits."""

from __future__ import annotations

import pytest

from rmq.filter.bloom import BloomFilter, BloomFilterData, murmur3_x64_128

pytestmark = pytest.mark.timeout(10)


def signed(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


@pytest.mark.parametrize("text,h1,h2", [
    # MurmurHash3_x64_128, seed 0 (the reference implementation; Guava's asLong() is h1)
    ("hello", -3758069500696749310, 6565844092913065241),
    ("cg#TopicTest", 2297897918988265729, -8168020230934052026),
    ("", 0, 0),
])
def test_murmur3_vectors(text, h1, h2):
    a, b = murmur3_x64_128(text.encode())
    assert (signed(a), signed(b)) == (h1, h2)


def test_k_and_m_as_4_9_8_computes_them():
    bf = BloomFilter(20, 32)  # the broker defaults
    assert (bf.k, bf.m) == (3, 112)  # m = ceil(32 * log2(5) * log2(e)) = 108 -> whole bytes
    assert (BloomFilter(10, 64).k, BloomFilter(10, 64).m) == (4, 312)
    with pytest.raises(ValueError):
        BloomFilter(100, 1)
    with pytest.raises(ValueError):
        BloomFilter(20, 0)


def test_positions_hash_to_and_hit():
    bf = BloomFilter(20, 32)
    data = bf.generate("cg#TopicTest")
    assert len(data.bit_pos) == 3 and all(0 <= p < 112 for p in data.bit_pos)
    assert data == bf.generate("cg#TopicTest") and bf.is_valid(data)
    bits = bytearray(bf.byte_length)
    assert not bf.is_hit(data, bits)
    bf.hash_to(data, bits)
    assert bf.is_hit(data, bits)
    other = bf.generate("other#TopicTest")
    assert bf.is_hit(other, bits) == all(p in data.bit_pos for p in other.bit_pos)
    for p in data.bit_pos:  # BitsArray: bit p is 1 << p % 8 of byte p // 8
        assert bits[p // 8] & (1 << p % 8)
    assert BloomFilterData.from_json_obj(data.to_json_obj()) == data
    with pytest.raises(ValueError):
        bf.is_hit(data, bytearray(3))
