"""The bloom filter of 4.9.8's SQL92 bitmap (``filter.util.BloomFilter``,
``BitsArray``, ``BloomFilterData``).

Each SQL92 consumer group gets k bit positions out of m, from the Guava
``murmur3_128`` hash (seed 0, ``asLong``: the first 64-bit word) of
``"<group>#<topic>"``; a message's bitmap has the positions of every group
whose expression it matches, so a pull can skip a message whose bitmap lacks
one of the group's positions without reading the commit log (a false hit only
costs that read).  k = ceil(log0.5(f/100)) and m = ceil(n * log2(100/f) *
log2(e)) rounded up to whole bytes, for the broker's
``maxErrorRateOfBloomFilter`` (f, percent) and ``expectConsumerNumUseFilter`` (n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3 x64 128 of ``data``: (h1, h2) as unsigned 64-bit words."""
    h1 = h2 = seed & _M64
    n = len(data)
    full = n - n % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i:i + 8], "little")
        k2 = int.from_bytes(data[i + 8:i + 16], "little")
        k1 = (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = ((_rotl(h1 ^ k1, 27) + h2) * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = ((_rotl(h2 ^ k2, 31) + h1) * 5 + 0x38495AB5) & _M64
    tail = data[full:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


@dataclass(frozen=True, slots=True)
class BloomFilterData:
    """A group's bit positions and the filter's bit count (``BloomFilterData``;
    consumerFilter.json keeps it as {"bitPos": [...], "bitNum": m})."""

    bit_pos: tuple[int, ...]
    bit_num: int

    def to_json_obj(self) -> dict:
        return {"bitNum": self.bit_num, "bitPos": list(self.bit_pos)}

    @classmethod
    def from_json_obj(cls, obj: object) -> BloomFilterData | None:
        if not isinstance(obj, dict):
            return None
        pos, num = obj.get("bitPos"), obj.get("bitNum")
        if not isinstance(pos, list) or not isinstance(num, int):
            return None
        return cls(tuple(int(p) for p in pos), num)


class BloomFilter:
    """k hash positions over m bits for an error rate of f percent and n groups."""

    __slots__ = ("f", "n", "k", "m")

    def __init__(self, f: int, n: int) -> None:
        if not 1 <= f < 100:
            raise ValueError("f must be greater or equal than 1 and less than 100")
        if n < 1:
            raise ValueError("n must be greater than 0")
        self.f, self.n = f, n
        rate = f / 100.0
        self.k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        self.m = 8 * math.ceil(m / 8.0)

    @property
    def byte_length(self) -> int:
        return self.m // 8

    def positions(self, text: str) -> tuple[int, ...]:
        """``calcBitPositions``: Java int arithmetic on the two halves of asLong."""
        h1, _ = murmur3_x64_128(text.encode("utf-8"))
        hash1 = _int32(h1)
        hash2 = _int32(h1 >> 32)
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % self.m)
        return tuple(out)

    def generate(self, text: str) -> BloomFilterData:
        return BloomFilterData(self.positions(text), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k

    def hash_to(self, data: BloomFilterData, bits: bytearray) -> None:
        """Set the group's positions in a message's bitmap (``BitsArray``: bit i is
        ``1 << i % 8`` of byte ``i // 8``)."""
        for p in data.bit_pos:
            bits[p >> 3] |= 1 << (p & 7)

    def is_hit(self, data: BloomFilterData, bits) -> bool:
        """Every position of the group set in ``bits`` (a message may match)."""
        if len(bits) * 8 != self.m:
            raise ValueError(f"Length({len(bits) * 8}) of bits is not equal to {self.m}!")
        return all(bits[p >> 3] & (1 << (p & 7)) for p in data.bit_pos)
