"""IndexFile: ``org.apache.rocketmq.store.index.IndexFile`` / ``IndexHeader`` / ``IndexService``.

Byte order: big-endian. ``index/<yyyyMMddHHmmssSSS>`` = 40-byte header, a slot table of
``hashSlotNum`` i32 (number of the newest entry in that slot, 0 = empty), then ``indexNum``
20-byte entries ``keyHash i32 | phyOffset i64 | timeDiff i32 (s since beginTimestamp) |
prevIndex i32``. Entry 0 is never used (indexCount starts at 1). Keys are ``topic#key`` for
UNIQ_KEY and each KEYS token; hash = abs(Java hashCode) (MIN_VALUE -> 0); slot = hash % slots.

RocketMQ's defaults are 5,000,000 slots and 20,000,000 entries (420,000,040 bytes); stores may
configure others. The geometry is not in the file: :func:`index_geometry` derives it from the
file size assuming RocketMQ's ratio ``maxIndexNum = 4 * maxHashSlotNum`` unless told.

A running broker's newest index file changes while it is read (``live``). ``IndexFile#putKey``
writes the entry, then its slot, then the header's hashSlotCount, indexCount, endPhyOffset and
endTimestamp, one field at a time. So against the header as first read (the reader's
snapshot): a slot may point at an entry past indexCount (written since: complete, as its slot
comes after it), the used slots may number more than hashSlotCount, and the last entry's
phyOffset may be past endPhyOffset. In a live file these are not damage; the slot table is
copied once for each check, so that a check sees one table.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqtool.formats.buffers import Buffer
from mqtool.formats.errors import FormatError
from mqtool.formats.javacompat import java_string_hash
from mqtool.formats.reference import dtype_once, layout

if TYPE_CHECKING:  # numpy is imported by the vectorised checks that use it
    import numpy as np

    INDEX_ENTRY_DTYPE: np.dtype[Any]
    """numpy dtype of an entry (keyHash, phyOffset, timeDiff, prevIndex), for bulk reads and
    writes (made on first use)."""

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 5_000_000 * 4


def _layouts() -> dict[str, Any]:
    import construct as cs

    return {
        "INDEX_HEADER": cs.Struct(
            "begin_timestamp" / cs.Int64sb,
            "end_timestamp" / cs.Int64sb,
            "begin_phy_offset" / cs.Int64sb,
            "end_phy_offset" / cs.Int64sb,
            "hash_slot_count" / cs.Int32sb,
            "index_count" / cs.Int32sb,
        ),
        "INDEX_ENTRY": cs.Struct(
            "key_hash" / cs.Int32sb,
            "phy_offset" / cs.Int64sb,
            "time_diff" / cs.Int32sb,
            "prev_index" / cs.Int32sb,
        ),
    }


def _entry_dtype() -> np.dtype[Any]:
    dtype: np.dtype[Any] = dtype_once(
        globals(), "INDEX_ENTRY_DTYPE", [("h", ">i4"), ("p", ">i8"), ("t", ">i4"), ("v", ">i4")])
    return dtype


def __getattr__(name: str) -> Any:
    """``INDEX_ENTRY_DTYPE``: numpy's dtype of an entry; ``INDEX_HEADER``, ``INDEX_ENTRY``: the
    reference layouts (construct, :mod:`mqtool.formats.reference`)."""
    if name == "INDEX_ENTRY_DTYPE":
        return _entry_dtype()
    return layout(__name__, name, _layouts)


INDEX_HEADER_STRUCT = struct.Struct(">qqqqii")
"""The 40-byte header for ``struct`` reads and writes (the layout of INDEX_HEADER)."""
INDEX_ENTRY_STRUCT = struct.Struct(">iqii")
"""One 20-byte entry for ``struct`` reads and writes (the layout of INDEX_ENTRY)."""
HASH_SLOT_STRUCT = struct.Struct(">i")
"""One 4-byte hash slot (the 1-based number of the slot's newest entry, 0 when empty)."""


@dataclass(frozen=True, slots=True)
class IndexHeader:
    """Header of an index file. Timestamps are epoch ms; hash_slot_count counts used slots."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One index entry; ``time_diff`` is seconds since the header's begin_timestamp."""

    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


@dataclass(frozen=True, slots=True)
class IndexGeometry:
    """An index file's slot and entry counts, and the byte positions they give."""

    hash_slot_num: int
    index_num: int

    @property
    def file_size(self) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + self.index_num * INDEX_SIZE

    def slot_pos(self, slot: int) -> int:
        return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE

    def entry_pos(self, n: int) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + n * INDEX_SIZE


def index_geometry(
    file_size: int,
    hash_slot_num: int | None = None,
    *,
    file: str | None = None,
    buf: Buffer | None = None,
    live: bool = False,
) -> IndexGeometry:
    """Slots and entries of an index file of ``file_size`` bytes.

    The geometry (``maxHashSlotNum``, ``maxIndexNum``) is store configuration, not file content.
    With ``hash_slot_num`` given, the entry count follows from the size. Otherwise, with the
    file's bytes in ``buf``, every split of the size into slots and entries is tried, RocketMQ's
    ratio of 4 entries per slot first, and the one the content proves is taken: the newest
    entries must head their slots' chains and the non-empty slots must number the header's
    hashSlotCount. Without ``buf`` the ratio of 4 is assumed. ``live``: the file is being
    written (module doc).
    """
    body = file_size - INDEX_HEADER_SIZE
    if body <= 0:
        raise FormatError(file, 0, f"index file of {file_size} bytes has no room for slots")
    if hash_slot_num is not None:
        rest = body - hash_slot_num * HASH_SLOT_SIZE
        if hash_slot_num <= 0 or rest < 0 or rest % INDEX_SIZE:
            raise FormatError(
                file, None, f"index size {file_size} does not fit {hash_slot_num} slots"
            )
        return IndexGeometry(hash_slot_num, rest // INDEX_SIZE)
    per_slot = HASH_SLOT_SIZE + 4 * INDEX_SIZE
    ratio4 = None
    if body % per_slot == 0:
        ratio4 = IndexGeometry(body // per_slot, 4 * (body // per_slot))
    if buf is None:
        if ratio4 is None:
            raise FormatError(
                file, None,
                f"index file size {file_size} is not 40 + 84*slots (give the slot count)",
            )
        return ratio4
    header = parse_header(buf, file=file)
    if ratio4 is not None and (
        header.index_count <= 1
        or (_plausible(buf, header, ratio4) and _proven(buf, header, ratio4, live))
    ):
        return ratio4
    for g in _candidate_geometries(buf, header, body):
        if header.index_count <= 1 or (_plausible(buf, header, g)
                                       and _proven(buf, header, g, live)):
            return g
    if ratio4 is not None and header.index_count <= ratio4.index_num:
        return ratio4  # RocketMQ's own split, content damaged: IndexReader.problems() says where
    for g in _candidate_geometries(buf, header, body, strict=False):
        if _plausible(buf, header, g, tolerate=2):
            return g  # most newest entries sit in their chains; the slot table is damaged
    raise FormatError(file, None, f"cannot tell the slot/entry geometry of {file_size}-byte index")


def _candidate_geometries(
    buf: Buffer, h: IndexHeader, body: int, chunk: int = 1 << 20, *, strict: bool = True
) -> Iterator[IndexGeometry]:
    """Every split of ``body`` into slots and at least indexCount entries, fewest slots first,
    in which the newest entry heads its slot's chain (a numpy prefilter over all the splits:
    a hostile 420 MB file has ~21 million of them, too many to test one by one). With
    ``strict=False`` that filter is dropped for a small file (at most 65,536 splits): its
    newest entry's slot may be the damaged one."""
    import numpy as np


    if body % HASH_SLOT_SIZE:
        return
    need = max(h.index_count, 1)
    # rest = body - 4*slots must be a multiple of 20: slots = body/4 (mod 5)
    first = (body // HASH_SLOT_SIZE) % 5 or 5
    most = (body - need * INDEX_SIZE) // HASH_SLOT_SIZE
    last = h.index_count - 1
    if not strict and (most - first) // 5 > 1 << 16:
        return
    a = np.frombuffer(buf, dtype=np.uint8)
    four = np.arange(4, dtype=np.int64)
    for lo in range(first, most + 1, 5 * chunk):
        slots = np.arange(lo, min(most + 1, lo + 5 * chunk), 5, dtype=np.int64)
        if h.index_count > 1 and strict:
            epos = INDEX_HEADER_SIZE + HASH_SLOT_SIZE * slots + INDEX_SIZE * last
            key_hash = a[epos[:, None] + four].view(">i4").reshape(-1).astype(np.int64)
            spos = INDEX_HEADER_SIZE + HASH_SLOT_SIZE * (key_hash % slots)
            head = a[spos[:, None] + four].view(">i4").reshape(-1)
            slots = slots[head == last]
        for n in slots.tolist():
            yield IndexGeometry(n, (body - n * HASH_SLOT_SIZE) // INDEX_SIZE)


def _plausible(buf: Buffer, h: IndexHeader, g: IndexGeometry, tolerate: int = 0) -> bool:
    """Cheap test: the last few entries written must sit in chains their slots lead to (all
    but ``tolerate`` of them, when the slot table may be damaged)."""
    if h.index_count > g.index_num:
        return False
    last = h.index_count - 1
    misses = 0
    tried = 0
    for n in range(last, max(0, last - 8), -1):
        tried += 1
        key_hash, _, _, _ = INDEX_ENTRY_STRUCT.unpack_from(buf, g.entry_pos(n))
        if key_hash < 0:
            misses += 1
            continue
        head = HASH_SLOT_STRUCT.unpack_from(buf, g.slot_pos(key_hash % g.hash_slot_num))[0]
        if head < n or head >= g.index_num:  # a head past `last`: written since (live)
            misses += 1
        elif head != n:
            hk = INDEX_ENTRY_STRUCT.unpack_from(buf, g.entry_pos(head))[0]
            if hk % g.hash_slot_num != key_hash % g.hash_slot_num:
                misses += 1
    return misses <= tolerate and misses < tried


def _proven(buf: Buffer, h: IndexHeader, g: IndexGeometry, live: bool = False) -> bool:
    """Full test: the number of non-empty slots equals the header's hashSlotCount (in a
    ``live`` file: lies between the slots that point at counted entries and all used ones)."""
    xp = _xp(g)
    top = g.index_num - 1 if live else h.index_count
    used = counted = 0
    for _nums, vals in _used_slots(buf, g, xp):
        if int(xp.amax(vals, initial=0)) > top:
            return False
        used += len(vals)
        counted += int(xp.count_nonzero((vals > 0) & (vals < h.index_count)))
    return h.index_count <= 1 or _slot_count_fits(used, counted, h, live)


SMALL_TABLE = 1 << 14
"""An index file of at most this many slots and entries is checked over Python lists
(:mod:`mqtool.formats.smallarray`), a larger one by numpy: the same rules, written once."""


def _xp(g: IndexGeometry) -> Any:
    """The array namespace the checks of a file of geometry ``g`` run with."""
    if g.hash_slot_num + g.index_num <= SMALL_TABLE:
        from mqtool.formats import smallarray

        return smallarray
    import numpy as np

    return np


def _used_slots(buf: Buffer, g: IndexGeometry, xp: Any) -> Iterator[tuple[Any, Any]]:
    """The slot table's used (non-zero) slots, :data:`SLOT_CHUNK` slots of the table at a time
    (the memory stays a few MiB whatever the file holds): their numbers and their values, each
    slot read once (one table for a check, whatever a broker writes meanwhile), in native
    byte order (the checks' comparisons run faster on native integers)."""
    if xp.__name__ == "numpy":
        # a zero is zero in either byte order: the used slots are found without a conversion
        raw = xp.frombuffer(buf, dtype=xp.uint32, count=g.hash_slot_num,
                            offset=INDEX_HEADER_SIZE)
        table = xp.frombuffer(buf, dtype=">i4", count=g.hash_slot_num, offset=INDEX_HEADER_SIZE)
        for lo in range(0, g.hash_slot_num, SLOT_CHUNK):
            nums = xp.flatnonzero(raw[lo:lo + SLOT_CHUNK] != 0) + lo
            yield nums, table[nums].astype(xp.int64)
        return
    values = struct.unpack_from(f">{g.hash_slot_num}i", buf, INDEX_HEADER_SIZE)
    nums = [i for i, v in enumerate(values) if v]
    yield xp.Vec(nums), xp.Vec([values[i] for i in nums])


def _entry_columns(buf: Buffer, g: IndexGeometry, count: int, xp: Any) -> tuple[Any, Any, Any]:
    """keyHash, phyOffset and prevIndex of entries 1 .. ``count``-1, one array each (numpy:
    views of the file's bytes)."""
    if xp.__name__ == "numpy":
        ent = xp.frombuffer(buf, dtype=_entry_dtype(), count=count - 1, offset=g.entry_pos(1))
        return ent["h"], ent["p"], ent["v"]
    rows = list(INDEX_ENTRY_STRUCT.iter_unpack(
        bytes(buf[g.entry_pos(1):g.entry_pos(count)])))
    return (xp.Vec([r[0] for r in rows]), xp.Vec([r[1] for r in rows]),
            xp.Vec([r[3] for r in rows]))


def _slot_count_fits(used: int, counted: int, h: IndexHeader, live: bool) -> bool:
    """Whether the ``used`` (non-zero) slots, ``counted`` of them pointing at entries the
    header counts, agree with the header's hashSlotCount: equal, or in a ``live`` file between
    the slots that point at entries the header counts and every used slot (module doc)."""
    if not live:
        return used == h.hash_slot_count
    return counted <= h.hash_slot_count <= used


def index_key_hash(key: str) -> int:
    """``IndexFile#indexKeyHashMethod``: abs of Java hashCode, Integer.MIN_VALUE -> 0."""
    h = java_string_hash(key)
    return 0 if h == -(2**31) else abs(h)


def index_key_hashes(prefixes: Sequence[int], keys: Sequence[str]) -> list[int]:
    """:func:`index_key_hash` of ``topic#key`` for many keys at once.

    ``prefixes[i]`` is the unsigned Java hash state of ``topic#`` for ``keys[i]``; the hash is
    continued vectorised (:func:`~mqtool.formats.javacompat.java_hash_continue_many`), then made
    non-negative as ``indexKeyHashMethod`` does (abs, ``Integer.MIN_VALUE`` -> 0).
    """
    from mqtool.formats.javacompat import java_hash_continue_many

    return list(index_key_hash_of(java_hash_continue_many(prefixes, keys)).tolist())


def index_key_hash_of(states: np.ndarray) -> np.ndarray:
    """``indexKeyHashMethod`` of ``String.hashCode`` states (uint32 array): abs of the signed
    int, ``Integer.MIN_VALUE`` -> 0 (int64 array)."""
    import numpy as np


    signed = np.asarray(states, dtype=np.uint32).view(np.int32).astype(np.int64)
    res = np.abs(signed)
    res[signed == -(2**31)] = 0
    return res


def build_key(topic: str, key: str) -> str:
    """``IndexService#buildKey``."""
    return f"{topic}#{key}"


def parse_header(buf: Buffer, *, file: str | None = None) -> IndexHeader:
    if len(buf) < INDEX_HEADER_SIZE:
        raise FormatError(file, 0, f"truncated index header: {len(buf)} of 40 bytes")
    return IndexHeader(*INDEX_HEADER_STRUCT.unpack_from(buf, 0))


def build_header(h: IndexHeader) -> bytes:
    return INDEX_HEADER_STRUCT.pack(
        h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
        h.hash_slot_count, h.index_count,
    )


def build_entry(e: IndexEntry) -> bytes:
    return INDEX_ENTRY_STRUCT.pack(e.key_hash, e.phy_offset, e.time_diff, e.prev_index)


SLOT_CHUNK = 1 << 18
"""Hash slots :meth:`IndexReader.problems` checks at a time (bounded memory)."""


class IndexReader:
    """Read-only view of one index file held in ``buf`` (bytes or a read-only mmap)."""

    def __init__(
        self, buf: Buffer, *, file: str | None = None,
        hash_slot_num: int | None = None, live: bool = False,
    ) -> None:
        self.buf = buf
        self.file = file
        self.live = live  # being written by a running broker (module doc)
        self.header = parse_header(buf, file=file)  # read once: what the reader goes by
        self.geometry = index_geometry(len(buf), hash_slot_num, file=file, buf=buf, live=live)
        if not 0 <= self.header.index_count <= self.geometry.index_num:
            raise FormatError(
                file, 36,
                f"indexCount {self.header.index_count} outside 0..{self.geometry.index_num}",
            )

    def slot_value(self, slot: int) -> int:
        return int(HASH_SLOT_STRUCT.unpack_from(self.buf, self.geometry.slot_pos(slot))[0])

    def entry(self, n: int) -> IndexEntry:
        if not 0 <= n < self.geometry.index_num:
            raise FormatError(self.file, None, f"index entry {n} out of range")
        return IndexEntry(*INDEX_ENTRY_STRUCT.unpack_from(self.buf, self.geometry.entry_pos(n)))

    def entries(self) -> Iterator[tuple[int, IndexEntry]]:
        """Every used entry ``(number, entry)`` in write order (1 .. indexCount-1)."""
        for n in range(1, self.header.index_count):
            yield n, self.entry(n)

    def lookup_hash(self, key_hash: int, max_hits: int = 1 << 20) -> list[IndexEntry]:
        """Entries in the chain of ``key_hash``'s slot whose keyHash matches, newest first.

        The chain walk is bounded (cycles or hostile prev pointers cannot hang it); callers
        must still read each record to filter hash collisions.
        """
        return [e for _, e in self.lookup_hash_at(key_hash, max_hits)]

    def lookup_hash_at(
        self, key_hash: int, max_hits: int = 1 << 20, bad: list[FormatError] | None = None
    ) -> list[tuple[int, IndexEntry]]:
        """:meth:`lookup_hash` with each entry's number (its byte position:
        ``geometry.entry_pos(n)``).

        A lookup checks the chain it walks (the whole table is :meth:`problems`' work): a slot
        or prevIndex that is not an earlier used entry, or an entry whose keyHash belongs to
        another slot (``IndexFile#putKey`` chains only entries of one slot), cut the chain; each
        is appended to ``bad`` at its in-file offset, since keys behind it may be missed.
        """
        count, g = self.header.index_count, self.geometry
        slot = key_hash % g.hash_slot_num
        n = self.slot_value(slot)
        hits: list[tuple[int, IndexEntry]] = []
        # a live file's slot may lead to an entry written after the header was read
        top = g.index_num if self.live else min(count, g.index_num)
        if n != INVALID_INDEX and not 0 < n < top:
            if bad is not None:
                bad.append(FormatError(self.file, g.slot_pos(slot), f"slot {slot} points at "
                                       f"entry {n} (entries 1..{count - 1})"))
            return hits
        seen = 0
        while n != INVALID_INDEX and seen < max(count, n + 1):
            e = self.entry(n)
            if e.key_hash < 0 or e.key_hash % g.hash_slot_num != slot:
                if bad is not None:
                    bad.append(FormatError(self.file, g.entry_pos(n), f"entry {n} in slot "
                                           f"{slot}'s chain has keyHash {e.key_hash} of "
                                           "another slot"))
                break
            if e.key_hash == key_hash:
                hits.append((n, e))
                if len(hits) >= max_hits:
                    break
            if e.prev_index != INVALID_INDEX and not 0 < e.prev_index < n:
                if bad is not None:
                    bad.append(FormatError(self.file, g.entry_pos(n), f"entry {n}: prevIndex "
                                           f"{e.prev_index} is not an earlier entry"))
                break
            n = e.prev_index
            seen += 1
        return hits

    def problems(self, entries: bool = True) -> list[FormatError]:
        """Cheap consistency checks of a file that opened (so lookups can trust it or not).

        ``IndexFile#putKey`` counts a slot in ``hashSlotCount`` when it was empty, and sets
        ``endPhyOffset`` to the phyOffset of the entry it writes: so the used slots must number
        ``hashSlotCount`` and the last entry must hold ``endPhyOffset``. Offsets are in-file.
        ``entries=False``: the header and slot table only (memory for the slots, not for every
        entry; ``mqtool verify`` checks the entries itself, a chunk at a time).
        """
        h, g = self.header, self.geometry
        xp = _xp(g)
        out: list[FormatError] = []
        # keyHash, phyOffset and prevIndex of the counted entries, read once for both checks
        cols = _entry_columns(self.buf, g, h.index_count, xp) if h.index_count > 1 else None
        bad, used, counted = self._slot_problems(xp, None if cols is None else cols[0])
        if not _slot_count_fits(used, counted, h, self.live):
            out.append(FormatError(
                self.file, 32, f"{used} hash slots in use, header says {h.hash_slot_count} "
                "(slot table damaged: lookups would miss keys)",
                expected=str(h.hash_slot_count), found=str(used),
            ))
        if entries and cols is not None:
            self._entry_problems(bad, xp, cols)
        out += [FormatError(self.file, pos, f"{what} (index damaged: lookups would miss or "
                            "mislead)") for pos, what in sorted(bad.items())]
        if h.index_count > 1 and entries and not self.live:  # live: endPhyOffset may lag
            last = self.entry(h.index_count - 1)
            if last.phy_offset != h.end_phy_offset:
                out.append(FormatError(
                    self.file, g.entry_pos(h.index_count - 1) + 4,
                    f"last entry's phyOffset {last.phy_offset} is not the header's endPhyOffset "
                    f"{h.end_phy_offset} (entries damaged)",
                    expected=str(h.end_phy_offset), found=str(last.phy_offset),
                ))
        return out

    def _slot_problems(
        self, xp: Any, key_hash: Any, most: int = 20
    ) -> tuple[dict[int, str], int, int]:
        """Slots that RocketMQ's writer cannot have left (over arrays, ``xp``: numpy or
        :mod:`mqtool.formats.smallarray`), by position: a slot that points past the entries or
        at an entry of another slot (``key_hash``: the entries' keyHash column, None without
        entries; at most ``most`` of each kind, the first in slot order); and the number of
        used slots, and of those that point at entries the header counts."""
        h, g = self.header, self.geometry
        count, nslot = h.index_count, g.hash_slot_num
        bad: dict[int, str] = {}
        # a live file's slots may point at entries written after the header was read
        top = g.index_num if self.live else max(count, 1)
        past: list[tuple[int, int]] = []
        wrong_head: list[tuple[int, int]] = []
        used = counted = 0
        for nums, vals in _used_slots(self.buf, g, xp):
            used += len(vals)
            heads_at = (vals > 0) & (vals < count)
            counted += int(xp.count_nonzero(heads_at))
            if len(past) < most:
                out_of_range = (vals < 0) | (vals >= top)
                left = most - len(past)
                past += zip(nums[out_of_range][:left].tolist(),
                            vals[out_of_range][:left].tolist(), strict=True)
            if key_hash is not None and len(wrong_head) < most:
                heads, entry = nums[heads_at], vals[heads_at]
                head_slot = key_hash[entry - 1].astype(xp.int64) % nslot
                wrong = head_slot != heads
                left = most - len(wrong_head)
                wrong_head += zip(heads[wrong][:left].tolist(), entry[wrong][:left].tolist(),
                                  strict=True)
        for i, v in past:
            bad[g.slot_pos(i)] = f"slot {i} points at entry {v} (entries 1..{count - 1})"
        for i, v in wrong_head:
            bad.setdefault(g.slot_pos(i), f"slot {i} points at entry {v}, "
                           "whose keyHash belongs to another slot")
        return bad, used, counted

    def _entry_problems(
        self, bad: dict[int, str], xp: Any, cols: tuple[Any, Any, Any], most: int = 20
    ) -> None:
        """Entries that RocketMQ's writer cannot have left, added to ``bad`` by position (over
        arrays, ``xp``; ``cols``: the entries' keyHash, phyOffset and prevIndex): an entry
        whose prevIndex is not an earlier entry or leads into another slot's chain, whose
        keyHash is negative, or whose phyOffset is outside the header's range or out of
        commitlog order (entries are written in commitlog order). At most ``most`` are listed,
        then a count."""
        h, g = self.header, self.geometry
        count, nslot = h.index_count, g.hash_slot_num
        key_hash, phy, prev = (c.astype(xp.int64) for c in cols)
        num = xp.arange(1, count)
        slot_of = key_hash % nslot
        why = xp.zeros(count - 1, xp.int8)
        why[(prev < 0) | (prev >= num)] = 1
        linked = (prev > 0) & (prev < num)
        why[linked & (slot_of[xp.clip(prev - 1, 0, count - 2)] != slot_of)] = 2
        why[key_hash < 0] = 3
        past_end = phy > h.end_phy_offset
        if self.live:  # the header's endPhyOffset is set after its indexCount
            past_end[-1] = False
        why[(phy < h.begin_phy_offset) | past_end] = 4
        if count > 3:  # one entry out of order between two neighbours that are in order
            mid = (phy[1:-1] < phy[:-2]) | (phy[1:-1] > phy[2:])
            ok = phy[:-2] <= phy[2:]
            why[xp.flatnonzero(mid & ok & (why[1:-1] == 0)) + 1] = 5
        text = {1: "prevIndex {v} is not an earlier entry",
                2: "prevIndex {v} leads into another slot's chain",
                3: "negative keyHash {k}",
                4: "phyOffset {p} outside the header's {b}..{e}",
                5: "phyOffset {p} out of commitlog order with its neighbours"}
        for k in xp.flatnonzero(why)[:most].tolist():
            bad[g.entry_pos(k + 1)] = f"entry {k + 1}: " + text[int(why[k])].format(
                v=int(prev[k]), k=int(key_hash[k]), p=int(phy[k]), b=h.begin_phy_offset,
                e=h.end_phy_offset)
        extra = int(xp.count_nonzero(why)) - min(most, int(xp.count_nonzero(why)))
        if extra > 0:
            bad[g.entry_pos(count - 1) + INDEX_SIZE - 1] = f"... and {extra} more entries"

    def lookup(self, topic: str, key: str) -> list[IndexEntry]:
        """Candidate entries for ``topic#key`` (hash matches; collisions not yet filtered)."""
        return self.lookup_hash(index_key_hash(build_key(topic, key)))
