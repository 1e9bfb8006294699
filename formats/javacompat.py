"""Java compatibility: the Java library behaviour RocketMQ's files depend on, in one place.

* ``String.hashCode`` over UTF-16 code units (signed :func:`java_string_hash`, unsigned and
  resumable :func:`java_hash_unsigned`, vectorised :func:`java_hash_continue_many`). Used for
  consume-queue tagsCodes (``MessageExtBrokerInner#tagsString2tagsCode``), IndexFile key hashes
  (``IndexFile#indexKeyHashMethod``) and map bucket order.
* ``java.util.HashMap`` iteration order (:class:`JavaHashMap`, :func:`hashmap_key_order`,
  :func:`hashmap_order_pairs`, :func:`hashmap_order`). RocketMQ serialises a message's
  properties by iterating a ``HashMap<String, String>``
  (``MessageDecoder#messageProperties2String``), so the order of the pairs in a stored record,
  its size and every physical offset after it depend on HashMap internals:

  - ``hash(key) = h ^ (h >>> 16)`` of ``String.hashCode()`` (UTF-16 code units, int32);
  - bucket ``= hash & (capacity - 1)``; the table is allocated on the first put with the initial
    capacity (default 16, ``tableSizeFor(n)`` when one is given), load factor 0.75;
  - a new key is appended to the tail of its bucket; replacing a value keeps the position;
  - ``resize()`` doubles the table and splits every bucket into a "lo" and a "hi" list, each
    keeping the relative order of the old list; a bucket growing past 8 entries in a table
    smaller than 64 also triggers a resize (``treeifyBin``). Tree bins (64+ slots with 9+
    collisions) are not emulated: property maps never get there;
  - ``remove`` unlinks the node and never shrinks the table.

* ``java.util.concurrent.ConcurrentHashMap`` iteration order (:func:`chm_order`): the config
  tables (``topics.json``, ``consumerOffset.json``, ``subscriptionGroup.json``) are written by
  iterating one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the vectorised functions that use it
    import numpy as np

_MASK = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# String.hashCode


def java_hash_unsigned(s: str, h: int = 0) -> int:
    """Continue a Java ``String.hashCode`` (unsigned 32-bit state ``h``) over ``s``."""
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & _MASK
        return h
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h


def to_int32(u: int) -> int:
    """An unsigned 32-bit value as Java's signed ``int``."""
    u &= _MASK
    return u - 0x100000000 if u & 0x80000000 else u


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16, signed int32."""
    return to_int32(java_hash_unsigned(s))


def java_hash_continue_many(prefixes: Sequence[int], keys: Sequence[str]) -> np.ndarray:
    """``String.hashCode`` state continued over many strings at once (uint32 array).

    ``prefixes[i]`` is the unsigned hash state to continue for ``keys[i]`` (0 for a plain
    ``hashCode``). Horner's rule unrolled, per key length: ``h * 31**n + sum(c[j] *
    31**(n-1-j))`` modulo 2**32 (Java's int wraps alike), one product of the keys' bytes with
    the powers of 31 taken modulo 2**32, in uint64 (a sum that wraps past 64 bits is still
    right modulo 2**32); non-ASCII keys take the per-character path.
    """
    import numpy as np

    n = len(keys)
    out = np.empty(n, dtype=np.uint32)
    pre = np.asarray(prefixes, dtype=np.uint64)
    groups: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        if k.isascii():
            groups.setdefault(len(k), []).append(i)
        else:
            out[i] = java_hash_unsigned(k, int(prefixes[i]))
    for length, idx in groups.items():
        sel = np.asarray(idx, dtype=np.int64)
        h = pre[sel] * np.uint64(_pow31(length))  # each factor below 2**32
        if length:
            chars = np.frombuffer(
                "".join([keys[i] for i in idx]).encode("ascii"), dtype=np.uint8
            ).reshape(len(idx), length)
            h = h + chars.astype(np.uint64) @ _powers31(length)
        out[sel] = h & np.uint64(0xFFFFFFFF)
    return out


def _pow31(n: int) -> int:
    """31**n modulo 2**32."""
    return pow(31, n, 1 << 32)


@lru_cache(maxsize=256)
def _powers31(n: int) -> np.ndarray:
    """31**(n-1), ..., 31**0, each modulo 2**32 (uint64): the weights of a key's bytes."""
    import numpy as np

    return np.array([_pow31(n - 1 - j) for j in range(n)], dtype=np.uint64)


def _wide_fix(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: np.ndarray,
    out: np.ndarray, wide: np.ndarray,
) -> None:
    """Hash the non-ASCII ranges' UTF-16 units (:func:`java_hash_unsigned`)."""
    import numpy as np

    for i in np.flatnonzero(wide).tolist():
        s = int(starts[i])
        text = buf[s : s + int(lengths[i])].tobytes().decode("utf-8", "surrogatepass")
        out[i] = java_hash_unsigned(text, int(init[i]))


def compiled_ascii_hash() -> Callable[..., int]:
    """The compiled ``String.hashCode`` continuation over ASCII bytes, for compiled callers
    (the batch encoder): ``f(buf, start, length, state) -> state`` (unsigned 32-bit;
    :mod:`.javahash`, tested equal to :func:`java_hash_unsigned`)."""
    from mqtool.formats import javahash

    return javahash.continue_hash


def java_hash_ranges(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: np.ndarray | None = None
) -> np.ndarray:
    """``String.hashCode`` state (uint32) of many UTF-8 byte ranges ``buf[starts[i]:][:lengths[i]]``
    of a uint8 array, each continued from ``init[i]`` (0 when None), in compiled code
    (:mod:`.javahash`); ranges with non-ASCII text hash their UTF-16 units here."""
    import numpy as np

    from mqtool.formats import javahash

    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    n = len(starts)
    pre = np.zeros(n, np.int64) if init is None else np.ascontiguousarray(init, dtype=np.int64)
    out = np.empty(n, np.int64)
    wide = np.empty(n, np.bool_)
    javahash.hash_ranges(buf, starts, lengths, pre, out, wide)
    _wide_fix(buf, starts, lengths, pre, out, wide)
    return out.astype(np.uint32)


def java_token_hashes(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, sep: str, init: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Split byte ranges of ``buf`` at the one-byte separator ``sep`` into non-empty tokens and
    hash each token continued from its range's ``init``: (range index, uint32 state) per token,
    in order (like ``[k for k in text.split(sep) if k]`` range by range)."""
    import numpy as np

    from mqtool.formats import javahash

    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    pre = np.ascontiguousarray(init, dtype=np.int64)
    cap = int(((lengths + 1) // 2).sum())  # tokens are separated: at most half of each range
    rows = np.empty(cap, np.int64)
    t_start = np.empty(cap, np.int64)
    t_len = np.empty(cap, np.int64)
    out = np.empty(cap, np.int64)
    wide = np.empty(cap, np.bool_)
    m = javahash.token_hashes(buf, starts, lengths, ord(sep), pre, rows, t_start, t_len, out,
                              wide)
    assert m >= 0
    rows = rows[:m]
    _wide_fix(buf, t_start[:m], t_len[:m], pre[rows], out[:m], wide[:m])
    return rows, out[:m].astype(np.uint32)


# --------------------------------------------------------------------------------------------
# java.util.HashMap

DEFAULT_INITIAL_CAPACITY = 16
MAXIMUM_CAPACITY = 1 << 30
DEFAULT_LOAD_FACTOR = 0.75
TREEIFY_THRESHOLD = 8
MIN_TREEIFY_CAPACITY = 64


def spread(h: int) -> int:
    """``HashMap.hash`` / ``ConcurrentHashMap.spread`` bucket bits: ``h ^ (h >>> 16)`` (unsigned;
    ConcurrentHashMap's sign mask never matters for a bucket index)."""
    h &= _MASK
    return h ^ (h >> 16)


def java_hashmap_hash(key: str) -> int:
    """``HashMap.hash(key)``: ``h ^ (h >>> 16)`` of ``String.hashCode()``, as an unsigned int32."""
    return spread(java_hash_unsigned(key))


def java_key_hash(k: str | int) -> int:
    """``hashCode()`` of a map key as unsigned int32: ``String.hashCode``, ``Integer.hashCode``
    (the value) or ``Long.hashCode`` (``v ^ (v >>> 32)``) for ints outside int32."""
    if isinstance(k, str):
        return java_hash_unsigned(k)
    if -(2**31) <= k < 2**31:
        return k & _MASK
    return (k ^ (k >> 32)) & _MASK


def table_size_for(cap: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= cap (at least 1)."""
    if cap <= 1:
        return 1
    n = 1 << (cap - 1).bit_length()
    return min(n, MAXIMUM_CAPACITY)


class JavaHashMap:
    """A ``java.util.HashMap<String, String>`` whose iteration order matches Java's.

    ``initial_capacity=None`` is ``new HashMap<>()``; an int is ``new HashMap<>(n)``.
    """

    __slots__ = ("_table", "_values", "_hashes", "_threshold", "_size")

    def __init__(self, initial_capacity: int | None = None) -> None:
        self._table: list[list[str]] | None = None
        self._values: dict[str, str] = {}
        self._hashes: dict[str, int] = {}
        # Before the table exists Java keeps the initial capacity in `threshold` (0 = default).
        self._threshold = 0 if initial_capacity is None else table_size_for(initial_capacity)
        self._size = 0

    @classmethod
    def from_pairs(
        cls, pairs: Iterable[tuple[str, str]], initial_capacity: int | None = None
    ) -> JavaHashMap:
        """A new map with ``put(k, v)`` applied for every pair, in order."""
        m = cls(initial_capacity)
        for k, v in pairs:
            m.put(k, v)
        return m

    @classmethod
    def copy_of(cls, other: JavaHashMap) -> JavaHashMap:
        """``new HashMap<>(other)``: capacity from the size, entries in ``other``'s order."""
        s = len(other)
        m = cls(int(s / DEFAULT_LOAD_FACTOR + 1.0) if s > 0 else None)
        for k, v in other.items():
            m.put(k, v)
        return m

    @property
    def capacity(self) -> int:
        """Current table length (0 before the first put)."""
        return 0 if self._table is None else len(self._table)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def get(self, key: str) -> str | None:
        """``map.get(key)``."""
        return self._values.get(key)

    def _resize(self) -> None:
        old = self._table
        if old is None:
            new_cap = self._threshold if self._threshold > 0 else DEFAULT_INITIAL_CAPACITY
            self._table = [[] for _ in range(new_cap)]
            self._threshold = int(new_cap * DEFAULT_LOAD_FACTOR)
            return
        old_cap = len(old)
        new_cap = old_cap << 1
        table: list[list[str]] = [[] for _ in range(new_cap)]
        hashes = self._hashes
        for j, bucket in enumerate(old):
            for k in bucket:
                if hashes[k] & old_cap:
                    table[j + old_cap].append(k)
                else:
                    table[j].append(k)
        self._table = table
        self._threshold = int(new_cap * DEFAULT_LOAD_FACTOR)

    def put(self, key: str, value: str) -> str | None:
        """``map.put(key, value)``; returns the previous value."""
        if key in self._values:
            prev = self._values[key]
            self._values[key] = value
            return prev
        if self._table is None:
            self._resize()
        assert self._table is not None
        h = self._hashes.get(key)
        if h is None:
            h = java_hashmap_hash(key)
            self._hashes[key] = h
        bucket = self._table[h & (len(self._table) - 1)]
        bucket.append(key)
        self._values[key] = value
        if len(bucket) > TREEIFY_THRESHOLD and len(self._table) < MIN_TREEIFY_CAPACITY:
            self._resize()  # treeifyBin on a small table resizes instead
        self._size += 1
        if self._size > self._threshold:
            self._resize()
        return None

    def remove(self, key: str) -> str | None:
        """``map.remove(key)``; returns the removed value."""
        if key not in self._values or self._table is None:
            return None
        h = self._hashes[key]
        self._table[h & (len(self._table) - 1)].remove(key)
        self._size -= 1
        return self._values.pop(key)

    def keys(self) -> Iterator[str]:
        """Keys in Java iteration order."""
        if self._table is None:
            return
        for bucket in self._table:
            yield from bucket

    def items(self) -> Iterator[tuple[str, str]]:
        """``entrySet()`` in Java iteration order."""
        values = self._values
        for k in self.keys():
            yield k, values[k]

    def to_dict(self) -> dict[str, str]:
        """A Python dict in Java iteration order."""
        return dict(self.items())

    def __repr__(self) -> str:
        return f"JavaHashMap({self.to_dict()!r}, capacity={self.capacity})"


@lru_cache(maxsize=4096)
def hashmap_key_order(
    keys: tuple[str, ...], initial_capacity: int | None = None
) -> tuple[int, ...]:
    """Iteration order of a fresh HashMap after putting ``keys`` (distinct) in that order.

    Returned as indexes into ``keys``; cached, so the write path pays for the emulation once per
    distinct key sequence.
    """
    m = JavaHashMap(initial_capacity)
    for k in keys:
        m.put(k, "")
    pos = {k: i for i, k in enumerate(keys)}
    return tuple(pos[k] for k in m.keys())


def hashmap_order_pairs(
    pairs: Iterable[tuple[str, str]], initial_capacity: int | None = None
) -> list[tuple[str, str]]:
    """``pairs`` put into a fresh HashMap (later duplicates replace values), in Java order."""
    d: dict[str, str] = {}
    for k, v in pairs:
        d[k] = v
    keys = tuple(d)
    return [(keys[i], d[keys[i]]) for i in hashmap_key_order(keys, initial_capacity)]


def hashmap_order(keys: Iterable[str], initial_capacity: int | None = None) -> list[str]:
    """``keys`` (distinct) in the iteration order of a ``HashMap(initial_capacity)`` (or a
    ``HashSet``) they were put into, in the given order."""
    key_list = tuple(keys)
    return [key_list[i] for i in hashmap_key_order(key_list, initial_capacity)]


# --------------------------------------------------------------------------------------------
# java.util.concurrent.ConcurrentHashMap


def chm_order(keys: Iterable[str | int], initial_capacity: int) -> list[str | int]:
    """Order ``keys`` as a ``ConcurrentHashMap(initial_capacity)`` holding them iterates.

    Iteration walks the bucket table (index = ``(h ^ (h >>> 16)) & (n - 1)`` with ``h`` the Java
    ``hashCode``); keys sharing a bucket keep the given (insertion) order. The table size follows
    the Java 8+ constructor (``tableSizeFor(c + c/2 + 1)``) and doubles at 3/4 load. Sorting is
    stable, so an order read from a broker-written file is left unchanged.
    """
    key_list = list(keys)
    n = table_size_for(initial_capacity + (initial_capacity >> 1) + 1)
    while len(key_list) >= n - (n >> 2) and n < MAXIMUM_CAPACITY:
        n <<= 1
    return sorted(key_list, key=lambda k: spread(java_key_hash(k)) & (n - 1))
