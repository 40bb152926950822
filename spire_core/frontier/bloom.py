"""Bloom-filter seen sets: "was this URL pushed before?" in about 1.2 bytes per URL at 1% errors.

    frontier = MemoryFrontier().dedup(bloom=10_000_000, error_rate=0.01)
    frontier = RedisFrontier(url, name="big").dedup(bloom=1_000_000_000)

An exact seen set costs 100 bytes and more per URL (the key itself, plus the set's overhead); a
Bloom filter sized for ``capacity`` keys costs ``-ln(error_rate) / ln(2)**2 / 8`` bytes per key,
whatever their length, at the price of false positives: a URL never pushed is taken for a
duplicate (and skipped) with probability ``error_rate`` once the filter holds ``capacity`` keys,
more past it. A URL pushed before is never queued again.

Where the filter lives depends on the store under the ``Dedup`` facade: a ``BloomStore`` keeps it
(``RedisFrontier``: bitmaps the push script tests and sets atomically, shared by every worker;
``SqliteFrontier``: in memory, persisted in the file); under any other store the facade keeps it in
this process's memory, with ``rbloom`` (a compiled filter: ``pip install 'spire-crawl[bloom]'``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from spire_core.errors import ConfigError

if TYPE_CHECKING:
    import rbloom

__all__ = ["Bloom", "BloomStore", "stable_hash"]

#: Bits of one Redis bitmap at most (a Redis string holds 512 MB): bigger filters are split in parts.
PART_BITS = 2**32
#: Filters are sized for this fraction of their error rate: a whole number of hashes and sampling
#: noise then still leave a full filter's measured rate under the one asked for (for 2% more bits).
_MARGIN = 0.9


@dataclasses.dataclass(frozen=True, slots=True)
class Bloom:
    """A Bloom filter's size: ``capacity`` keys at ``error_rate`` false positives.

    Its ``bits`` and ``hashes`` follow the textbook optimum; ``offsets`` maps a key to its bits with
    the same hash functions in every process (BLAKE2b, then double hashing).
    """

    capacity: int
    error_rate: float = 0.01
    #: The filter's size in bits, how many hash functions set bits per key, and in how many bitmaps
    #: of at most ``PART_BITS`` it is split (a key's bits all lie in one), each ``part_bits`` long.
    bits: int = dataclasses.field(init=False, repr=False, compare=False)
    hashes: int = dataclasses.field(init=False, repr=False, compare=False)
    parts: int = dataclasses.field(init=False, repr=False, compare=False)
    part_bits: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise ConfigError(f"a Bloom filter's capacity is a number of keys, at least 1, not {self.capacity!r}")
        if not 0 < self.error_rate < 1:
            raise ConfigError(f"a Bloom filter's error_rate is between 0 and 1, not {self.error_rate!r}")
        bits = math.ceil(-self.capacity * math.log(self.error_rate * _MARGIN) / math.log(2) ** 2)
        parts = math.ceil(bits / PART_BITS)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "hashes", max(1, round(bits / self.capacity * math.log(2))))
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "part_bits", -(-bits // parts))

    @property
    def bytes_per_key(self) -> float:
        return self.bits / 8 / self.capacity

    def offsets(self, key: str) -> tuple[int, list[int]]:
        """The part holding ``key``'s bits, and their offsets in it."""
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first, second = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
        size = self.part_bits
        return first % self.parts, [(first + i * second) % size for i in range(self.hashes)]

    def in_memory(self, *, stable: bool = False) -> rbloom.Bloom:
        """An empty ``rbloom`` filter of this size; ``stable`` hashes alike in every process (to persist it)."""
        try:
            import rbloom
        except ImportError as exc:
            raise ConfigError("a Bloom seen set in memory needs rbloom: pip install 'spire-crawl[bloom]'") from exc
        if stable:
            return rbloom.Bloom(self.capacity, self.error_rate * _MARGIN, stable_hash)
        return rbloom.Bloom(self.capacity, self.error_rate * _MARGIN)


def stable_hash(key: str) -> int:
    """A 128-bit hash of a key that every process computes alike (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest(), signed=True)


@runtime_checkable
class BloomStore(Protocol):
    """A frontier store that keeps a Bloom seen set itself, in place of its exact one."""

    def use_bloom(self, bloom: Bloom) -> None:
        """From now on, unique pushes and ``seen`` consult a Bloom filter of this size. Call before first use."""
        ...
