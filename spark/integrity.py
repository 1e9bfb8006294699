"""The integrity audit of ``mqtool scan`` (imports pyspark): damage inside each file and
between the files of a store.

Within a file: unreadable commitlog regions and BODYCRC failures (from the commitlog pass).
Between files (:func:`cross_file`): units or index entries that point at no message
(``cq-dangling``, ``index-dangling``), at another message than their own or with a tagsCode
that is not their message's (its tag's hash; in the schedule topic a deliver time a delay
level gives: ``cq-mismatch``, verify's unit rule, :mod:`mqtool.store.unit_check`), index
entries whose keyHash is none of their message's keys, whose prevIndex names no earlier entry
or whose timeDiff is not what their message's store time gives in their file
(``index-mismatch``, verify's entry rules, :mod:`mqtool.integrity.indexcheck`), and messages
that lack their unit (``cq-missing``). An index file's header and slot table are checked on
the driver, by verify's own check (:func:`mqtool.spark.scan.layout_findings`). First each
store's tallies (counts and hashes of each side, made in the aggregations the scan runs
anyway, :func:`settle`) settle the sides that are whole; what they do not settle goes
through one shuffle of the messages' key columns, the consume-queue units and the index
entries together, grouped by (store, commitLogOffset). The small sides (where each store's
commitlog starts, each queue's first offset) are broadcast. Findings are rows of the one
:class:`~mqtool.formats.errors.Finding` type (:data:`~mqtool.spark.schema.FINDING_SCHEMA`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from mqtool.formats.errors import (
    CQ_DANGLING,
    CQ_MISMATCH,
    CQ_MISSING,
    FINDING_KINDS,
    INDEX_DANGLING,
    INDEX_MISMATCH,
    UNREADABLE,
    CrcMismatchError,
    Finding,
    Severity,
)
from mqtool.formats.rules import (
    DELAY_UNIT_MS,
    KEY_SEPARATOR,
    MAX_ADDR,
    SCHEDULE_TOPIC,
    TRANSACTION_ROLLBACK_TYPE,
    delay_written,
    schedule_unit_delay,
)
from mqtool.integrity.dispatch_rules import (
    NOT_IN_CONSUME_QUEUE,
    TRANSACTION_TYPE_MASK,
    prev_index_bad,
)
from mqtool.spark.audits import CRC_ROW, TALLY_SUM, TALLY_XOR, fold_tallies, messages
from mqtool.spark.schema import (
    FINDING_SCHEMA,
    RECORD_KIND_MESSAGE,
    RECORD_KIND_UNREADABLE,
    finding_row,
    spark_schema,
)
from mqtool.store.unit_check import DELIVER_EXPECTED

FINDING_COLUMNS = FINDING_SCHEMA.names
_KEYS = ["store", "commitLogOffset"]


def gets_unit(sys_flag: Column) -> Column:
    """Whether a message record of ``sys_flag`` gets a consume-queue unit: the rule of
    :func:`mqtool.integrity.dispatch_rules.expected_in_cq` as a column
    (tests/spark/test_spark_facts.py checks the two, and ``FactsJob.java``'s reading of
    :func:`unit_rule`, against each other)."""
    return ~sys_flag.bitwiseAND(TRANSACTION_TYPE_MASK).isin(*NOT_IN_CONSUME_QUEUE)


def unit_rule() -> dict[str, Any]:
    """:func:`gets_unit` as ``FactsJob.java`` is told it: a record gets a unit when its sysFlag
    and ``txnMask`` is none of ``notInConsumeQueue``."""
    return {"txnMask": TRANSACTION_TYPE_MASK, "notInConsumeQueue": list(NOT_IN_CONSUME_QUEUE)}


# --- integrity -------------------------------------------------------------------------------
def _finding(
    kind: str, file: Column, offset: Column, detail: Column, phy: Column | None = None,
    kind_col: Column | None = None, expected: Column | None = None, found: Column | None = None,
) -> list[Column]:
    """The FINDING_SCHEMA columns of a :class:`~mqtool.formats.errors.Finding` of ``kind``
    (a registered name: checked here, on the driver; ``kind_col``: a column holding one of
    the registered names, ``kind`` or others the caller checked)."""
    if kind not in FINDING_KINDS:
        raise ValueError(f"unknown finding kind {kind!r}")
    return [
        F.col("store"),
        F.lit(str(Severity.ERROR)).alias("severity"),
        (F.lit(kind) if kind_col is None else kind_col).alias("kind"),
        file.alias("file"),
        offset.cast("long").alias("offset"),
        detail.alias("detail"),
        (F.lit(None) if expected is None else expected).cast("string").alias("expected"),
        (F.lit(None) if found is None else found).cast("string").alias("found"),
        (F.lit(None) if phy is None else phy).cast("long").alias("phy"),
    ]


def _java(v: Any) -> str:
    """A value as Spark's ``format_string`` (Java's Formatter) prints it: null as "null"."""
    return "null" if v is None else str(v)


def record_findings(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """FINDING_SCHEMA rows for the rare rows of the commitlog pass
    (:func:`mqtool.spark.audits.fact_tables`' ``rows``): regions that hold no record (corrupt
    or torn bytes) and messages whose BODYCRC does not match the stored body."""
    out = []
    for r in rows:
        if r["recordType"] == RECORD_KIND_UNREADABLE:
            f = Finding(UNREADABLE, r["file"], r["fileOffset"],
                        f"{_java(r['storeSize'])} bytes: {_java(r['detail'])}",
                        phy=r["commitLogOffset"])
        elif r["recordType"] == CRC_ROW:
            f = Finding(CrcMismatchError.kind, r["file"], r["fileOffset"],
                        f"BODYCRC {_java(r['bodyCRC'])} does not match the "
                        f"{_java(r['bodyLength'])}-byte body ({_java(r['topic'])}/"
                        f"{_java(r['queueId'])}@{_java(r['queueOffset'])})",
                        phy=r["commitLogOffset"])
        else:
            continue  # a hand-over to the Python decoder, not damage
        out.append(finding_row(r["store"], f))
    return out


SUSPECTS_MAX = 1_000_000
"""At most this many suspect offsets go to the exact check as a broadcast list; beyond it the
exact check runs over every row (a store that damaged is slow to audit, not misreported)."""


# --- tallies: the cross-file check of a clean store without a shuffle ------------------------
# Per store, each side of the check is reduced to counts and hashes of its whole multiset, in
# aggregations the scan runs anyway (the commitlog's facts, the consume queue's facts) and one
# small job over the index (:func:`index_tallies`). Equal tallies mean equal multisets (but for
# 64-bit hash collisions, the odds the offset check takes too), which is exactly "nothing to
# find"; a store whose tallies differ goes through the offset check (:func:`_suspects`), so
# the findings never depend on them.
#
# Units: the messages that get a unit (by offset, topic, queue, queue offset and size) are a set,
# as each commitlog offset holds one message; the units at or above the commitlog's start are a
# multiset U. XOR and count of U equal those of the messages only when U is that set: each of
# the messages must occur an odd number of times in U, anything else an even number, and the
# count leaves room for nothing more.
# Index: a message gets one entry per index key (mqtool.formats.rules.index_keys), so the
# entries' offsets are a multiset on both sides: compared by exact sums (count, and three
# chunks of xxhash64(offset), each weighted by the message's key count; no overflow below 2^41
# entries per store). The messages counted are those inside the span the index files' headers
# say they cover (beginPhyOffset .. endPhyOffset), ROLLBACK records never.


class Settled(NamedTuple):
    """What a store's tallies settled (:func:`settle`)."""

    units: bool  # its units are exactly one per message that gets one: no consume-queue finding
    index: bool  # its index entries are exactly its messages' keys: no index finding
    messages: bool  # both, and its commitlog files follow each other: nothing to check


UNSETTLED = Settled(False, False, False)
_UNIT_TALLIES = (f"{TALLY_SUM}cqN", f"{TALLY_XOR}cq")
_CHUNK_BITS = 21
_INDEX_TALLIES = (f"{TALLY_SUM}ixN", *(f"{TALLY_SUM}ix{i}" for i in range(3)))


def _by_store(values: Mapping[str, Any], cast: str) -> Column:
    """A literal per store (null for a store not in ``values`` or valued None)."""
    col = F.lit(None).cast(cast)
    for store, value in values.items():
        if value is not None:
            col = F.when(F.col("store") == F.lit(store), F.lit(value).cast(cast)).otherwise(col)
    return col


def _known(cl_start: Mapping[str, Any]) -> Column:
    """A unit or index entry that may be a finding: at or above its store's first commitlog
    offset, or impossible (negative), or of a store with no commitlog file."""
    low = _by_store(_known_from(cl_start), "long")
    here = F.col("commitLogOffset")
    return low.isNull() | (here >= low) | (here < 0)


def java_string_hash(text: Column) -> Column:
    """``String#hashCode`` of the string column ``text`` as a long (Java's int, signed), over
    its UTF-16 code units as Java counts them; 0 for null or empty:
    :func:`mqtool.formats.rules.tags_code_of` as a column (tests/spark/test_spark_damage.py holds
    the two equal)."""
    units = F.hex(F.encode(text, "UTF-16BE"))  # four hex digits a code unit
    h = F.aggregate(
        F.sequence(F.lit(0), (F.length(units) / 4).cast("int") - 1), F.lit(0).cast("long"),
        lambda acc, i: (acc * 31 + F.conv(F.substr(units, i * 4 + 1, F.lit(4)), 16, 10)
                        .cast("long")) % F.lit(2**32))
    return F.when(text.isNull() | (F.length(text) == 0), F.lit(0).cast("long")).otherwise(
        (h + F.lit(2**31)) % F.lit(2**32) - F.lit(2**31))


def message_tag() -> Column:
    """What a message gives its unit's tagsCode to compare with (:func:`unit_tag`): outside
    the schedule topic, the hash of its TAGS (``tags``; 0 without), the tagsCode the unit rule
    wants (:func:`mqtool.integrity.dispatch_rules.tags_code_is_tag_hash`); in it, its
    storeTimestamp modulo :data:`~mqtool.formats.rules.DELAY_UNIT_MS`, which a deliver time
    the broker wrote keeps (:func:`~mqtool.formats.rules.delay_written`: whole seconds)."""
    return F.when(F.col("topic") == F.lit(SCHEDULE_TOPIC),
                  F.pmod(F.col("storeTimestamp").cast("long"), F.lit(DELAY_UNIT_MS))
                  ).otherwise(java_string_hash(F.col("tags")))


def unit_tag() -> Column:
    """A unit's side of :func:`message_tag`: its tagsCode; in the schedule topic, that
    deliver time modulo :data:`~mqtool.formats.rules.DELAY_UNIT_MS`. (An address into
    ``consumequeue_ext`` differs from its message's: :func:`_exact` makes it no finding.)"""
    tag = F.col("tagsCode").cast("long")
    return F.when(F.col("topic") == F.lit(SCHEDULE_TOPIC), F.pmod(tag, F.lit(DELAY_UNIT_MS))
                  ).otherwise(tag)


def _unit_hash(tag: Column) -> Column:
    """xxhash64 of what a unit and its message share, typed alike on both sides (topic and
    queueId first: the Java reader hashes them once per queue); ``tag``: :func:`message_tag`
    or :func:`unit_tag`."""
    return F.xxhash64(F.col("topic"), F.col("queueId").cast("int"),
                      F.col("commitLogOffset").cast("long"), F.col("queueOffset").cast("long"),
                      F.col("storeSize").cast("int"), tag)


def _index_sums(hashes: Column) -> dict[str, Column]:
    """The index tallies of rows that each stand for entries, ``hashes`` an array of their
    :func:`entry_hash` values: their count and the sums of three chunks of each hash."""
    mask = F.lit((1 << _CHUNK_BITS) - 1).cast("long")
    zero = F.lit(0).cast("long")

    def chunk(i: int) -> Column:
        return F.aggregate(hashes, zero, lambda acc, h: acc + (
            F.shiftrightunsigned(h, i * _CHUNK_BITS) if i == 2
            else F.shiftrightunsigned(h, i * _CHUNK_BITS).bitwiseAND(mask)))
    return {_INDEX_TALLIES[0]: F.size(hashes).cast("long"),
            **{name: chunk(i) for i, name in enumerate(_INDEX_TALLIES[1:])}}


def entry_hash(key_hash: Column, *more: Column) -> Column:
    """What an index entry and its message share: xxhash64 of (commitLogOffset, keyHash), and
    of ``more`` (ints) after them, each skipped where null (Spark's hash of a null leaves the
    hash as it was, as ``FactsJob`` does): the timeDiff where verify checks it
    (:func:`entry_time_checked`)."""
    return F.xxhash64(F.col("commitLogOffset").cast("long"), key_hash.cast("int"),
                      *[c.cast("int") for c in more])


def entries_hash() -> Column:
    """:func:`entry_hash` of an index entry row (``entry``, ``keyHash``, ``commitLogOffset``,
    ``timeDiff``, ``prevIndex``, ``beginTimestamp``): an entry whose prevIndex names no earlier
    entry hashes its prevIndex too, which no message gives."""
    entry = F.col("entry")
    return entry_hash(
        F.col("keyHash"),
        F.when(entry_time_checked(entry, F.col("beginTimestamp")), F.col("timeDiff")),
        F.when(prev_index_bad(F.col("prevIndex"), entry), F.col("prevIndex")))


def entry_time_checked(entry: Column, begin_timestamp: Column) -> Column:
    """Whether verify checks an entry's timeDiff (:mod:`mqtool.integrity.indexcheck`): not a
    file's first entry (``IndexFile#putKey`` measures it against the begin time the file was
    made with, then makes its store time the begin time), in a file with a begin time."""
    return (entry >= F.lit(2)) & (begin_timestamp > F.lit(0))


def index_time_diff(store_timestamp: Column, begin_timestamp: Column) -> Column:
    """``IndexFile#putKey``'s timeDiff, whole seconds from ``begin_timestamp`` to
    ``store_timestamp`` clamped to ``0..Integer.MAX_VALUE``
    (:func:`mqtool.integrity.dispatch_rules.index_time_diffs`, over columns)."""
    d = F.greatest(store_timestamp.cast("long") - begin_timestamp.cast("long"),
                   F.lit(0).cast("long"))
    whole = ((d - d % F.lit(1000)) / F.lit(1000)).cast("long")  # exact: a multiple of 1000
    return F.least(whole, F.lit(0x7FFFFFFF).cast("long")).cast("int")


def index_key_array() -> Column:
    """The keys ``IndexService#buildIndex`` indexes a message by, over the ``uniqKey`` and
    ``keys`` columns (without the ``topic#`` prefix): :func:`mqtool.formats.rules.record_keys`
    (the UNIQ_KEY, each non-empty KEYS token)."""
    none = F.array().cast("array<string>")
    tokens = F.filter(F.split(F.col("keys"), re.escape(KEY_SEPARATOR)),
                      lambda t: t != F.lit(""))
    return F.concat(F.when(F.col("uniqKey").isNull(), none).otherwise(F.array(F.col("uniqKey"))),
                    F.when(F.col("keys").isNull(), none).otherwise(tokens))


def index_key_hashes() -> Column:
    """``IndexFile#indexKeyHashMethod`` of each ``topic#key`` of :func:`index_key_array`
    (:func:`mqtool.formats.indexfile.index_key_hash`: abs of the hash, Integer.MIN_VALUE 0)."""
    return F.transform(index_key_array(), lambda k: (F.abs(java_string_hash(
        F.concat(F.col("topic"), F.lit("#"), k))) % F.lit(2**31)).cast("int"))


def index_key_count() -> Column:
    """How many entries ``IndexService#buildIndex`` adds for a message, over the ``uniqKey`` and
    ``keys`` columns: :func:`mqtool.formats.rules.index_keys` counted (one for a UNIQ_KEY, one
    per non-empty KEYS token)."""
    return F.size(index_key_array())


MESSAGE_TALLY_COLUMNS = ("tags", "keys", "uniqKey")
"""The ``records`` columns :func:`message_tallies` and :func:`cross_file` read besides the
per-message audits' own (``AUDIT_COLUMNS`` of :mod:`mqtool.spark.scan`)."""


def _indexed(index_spans: Mapping[str, IndexSpan | None]) -> Column:
    """Whether a message row gets index entries (``IndexService#buildIndex``): not a
    transaction rollback, and inside the commitlog span its store's index files cover
    (:func:`index_spans`)."""
    txn = F.col("sysFlag").bitwiseAND(TRANSACTION_TYPE_MASK)
    lo = _by_store({s: None if v is None else v[0] for s, v in index_spans.items()}, "long")
    hi = _by_store({s: None if v is None else v[1] for s, v in index_spans.items()}, "long")
    return (txn != F.lit(TRANSACTION_ROLLBACK_TYPE)) & F.col("commitLogOffset").between(lo, hi)


def _key_entry_hashes(index_spans: Mapping[str, IndexSpan | None]) -> Column:
    """:func:`entry_hash` of each entry a message's keys give (:func:`index_key_hashes`), with
    the timeDiff its file's begin time gives where verify checks it (:func:`key_files`)."""
    o = F.col("commitLogOffset").cast("long")
    f, before, begins, times = key_files(index_spans)

    def one(k: Column, i: Column) -> Column:
        g = F.greatest(F.when(i < before, f - 1).otherwise(f), F.lit(1))  # the key's file
        first = (F.element_at(begins, g) == o) & (i == F.when(g == f, before).otherwise(0))
        begin = F.element_at(times, g)
        return entry_hash(k, F.when((f >= 1) & ~first & (begin > 0), index_time_diff(
            F.col("storeTimestamp"), begin)))
    return F.transform(index_key_hashes(), one)


def key_files(index_spans: Mapping[str, IndexSpan | None]) -> tuple[Column, ...]:
    """Over a message row (``store``, ``commitLogOffset``): the index file its keys go to, as
    the 1-based number ``f`` of its store's last file that begins at or before it
    (:attr:`IndexSpan.files`); ``before``: how many of its keys went to file ``f - 1`` (a
    message whose keys did not all fit there); and the store's files' beginPhyOffsets and
    beginTimestamps (arrays)."""
    def arr(i: int) -> Column:
        return _by_store({s: [int(f[i]) for f in v.files] for s, v in index_spans.items()
                          if v is not None}, "array<long>")
    begins, times, befores = arr(0), arr(2), arr(3)
    o = F.col("commitLogOffset").cast("long")
    f = F.aggregate(begins, F.lit(0), lambda n, b: n + (b <= o).cast("int"))
    at = F.greatest(f, F.lit(1))  # (an array's first element is number 1)
    before = F.when(F.element_at(begins, at) == o,
                    F.element_at(befores, at).cast("int")).otherwise(F.lit(0))
    return f, before, begins, times


def message_tallies(index_spans: Mapping[str, IndexSpan | None]) -> dict[str, Column]:
    """The messages' tallies, columns over a ``records`` projection (``recordType``,
    ``commitLogOffset``, ``topic``, ``queueId``, ``queueOffset``, ``storeSize``, ``sysFlag``,
    ``storeTimestamp``, ``tags``, ``keys``, ``uniqKey``) for
    :func:`mqtool.spark.audits.message_facts`; ``index_spans``:
    :func:`index_spans`."""
    is_m = F.col("recordType") == F.lit(RECORD_KIND_MESSAGE)
    unit = is_m & gets_unit(F.col("sysFlag"))
    indexed = is_m & _indexed(index_spans)
    return {_UNIT_TALLIES[0]: F.when(unit, F.lit(1)),
            _UNIT_TALLIES[1]: F.when(unit, _unit_hash(message_tag())),
            **{name: F.when(indexed, c)
               for name, c in _index_sums(_key_entry_hashes(index_spans)).items()}}


def message_tally_rules(index_spans: Mapping[str, IndexSpan | None]) -> dict[str, Any]:
    """:func:`message_tallies` as ``FactsJob.java`` is told it
    (:func:`mqtool.spark.audits.fact_rules`): the tally names, the sysFlag rules, the key
    separator and ``index_spans``."""
    return {"tallyNames": [*_UNIT_TALLIES, *_INDEX_TALLIES],
            **unit_rule(), "txnRollback": TRANSACTION_ROLLBACK_TYPE, "keySeparator": KEY_SEPARATOR,
            "scheduleTopic": SCHEDULE_TOPIC, "delayUnitMs": DELAY_UNIT_MS,
            "indexSpans": {s: None if v is None else [v.lo, v.hi] for s, v in index_spans.items()},
            "indexFiles": {s: [list(f) for f in v.files] for s, v in index_spans.items()
                           if v is not None}}


def unit_tallies(cl_start: Mapping[str, Any]) -> dict[str, Column]:
    """The units' tallies, columns over a ``consumequeue`` table for
    :func:`mqtool.spark.audits.queue_facts`."""
    known = _known(cl_start)
    return {_UNIT_TALLIES[0]: F.when(known, F.lit(1)),
            _UNIT_TALLIES[1]: F.when(known, _unit_hash(unit_tag()))}


def index_tallies(index: DataFrame, cl_start: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """store -> the index entries' tallies (one small job: an aggregation per store)."""
    sums = _index_sums(F.array(entries_hash()))
    rows = (index.filter(_known(cl_start)).groupBy("store")
            .agg(*[F.sum(c).alias(n) for n, c in sums.items()]).collect())
    return fold_tallies(r.asDict() for r in rows)


def unit_tally_rules(cl_start: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`unit_tallies` as ``FactsJob.java`` is told it
    (:func:`mqtool.spark.audits.queue_rules`)."""
    return {"tallyNames": list(_UNIT_TALLIES), "knownFrom": _known_from(cl_start),
            "delayUnitMs": DELAY_UNIT_MS}


def index_tally_rules(cl_start: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`index_tallies` as ``FactsJob.java`` is told it
    (:func:`mqtool.spark.source.java_aux_facts`)."""
    return {"tallyNames": list(_INDEX_TALLIES), "knownFrom": _known_from(cl_start)}


def _known_from(cl_start: Mapping[str, Any]) -> dict[str, int | None]:
    # _known's rule, which FactsJob.AuxRules#known mirrors
    return {s: None if v is None else int(v) for s, v in cl_start.items()}


class IndexSpan(NamedTuple):
    """Where a store's index files (those with entries) point into its commitlog."""

    lo: int  # the first file's beginPhyOffset
    hi: int  # the last file's endPhyOffset
    files: tuple[tuple[int, int, int, int], ...]
    """Each file in order: its beginPhyOffset, endPhyOffset and beginTimestamp, and how many
    keys of the message at its beginPhyOffset went to the file before it
    (``IndexService#buildIndex`` goes on in a new file when one is full in the middle of a
    message's keys: those entries end the previous file, at its endPhyOffset)."""


def index_spans(stores: Iterable[str]) -> dict[str, IndexSpan | None]:
    """store -> where its index files point (:class:`IndexSpan`, from their headers); None:
    no file with entries. A header that cannot be read is a finding of its own
    (:func:`mqtool.spark.scan.layout_findings`), and its file is left out here."""
    from mqtool.formats.indexfile import INDEX_HEADER_SIZE, parse_header
    from mqtool.spark import splits

    out: dict[str, IndexSpan | None] = {}
    for store in stores:
        files: list[tuple[int, int, int, int]] = []
        last = ""  # the path of the file that gave files[-1]
        for s in splits.index_splits(store, splits.find_store_root(store)):
            with open(s.path, "rb") as f:
                head = f.read(INDEX_HEADER_SIZE)
            if len(head) < INDEX_HEADER_SIZE:
                continue  # reported by layout_findings
            h = parse_header(head, file=s.name)
            if h.index_count > 1:
                before = 0
                if files and files[-1][1] == h.begin_phy_offset:
                    before = _entries_at_end(last, h.begin_phy_offset)
                files.append((h.begin_phy_offset, h.end_phy_offset, h.begin_timestamp, before))
                last = s.path
        out[store] = IndexSpan(files[0][0], max(f[1] for f in files), tuple(files)) \
            if files else None
    return out


def _entries_at_end(path: str, phy: int) -> int:
    """How many of the last entries of the index file ``path`` point at ``phy``."""
    from pathlib import Path

    from mqtool.formats.buffers import close_map
    from mqtool.formats.errors import FormatError
    from mqtool.formats.indexfile import IndexReader
    from mqtool.store.files import map_readonly

    buf = map_readonly(Path(path))
    try:
        r = IndexReader(buf, file=path)
        n, count = 0, r.header.index_count
        while count - 1 - n >= 1 and r.entry(count - 1 - n).phy_offset == phy:
            n += 1
        del r
        return n
    except FormatError:
        return 0  # reported by layout_findings; the tallies then differ, the exact check runs
    finally:
        close_map(buf)


def settle(
    stores: Iterable[str],
    messages_t: Mapping[str, Mapping[str, Any]],
    units_t: Mapping[str, Mapping[str, Any]],
    index_t: Mapping[str, Mapping[str, Any]],
    contiguous: Mapping[str, bool],
) -> dict[str, Settled]:
    """store -> what its tallies settled: ``messages_t`` (:func:`message_tallies` folded),
    ``units_t`` (:func:`unit_tallies` folded), ``index_t`` (:func:`index_tallies`);
    ``contiguous``: whether its commitlog files follow each other (no ``layout`` finding)."""
    out = {}
    for store in stores:
        m, u, i = (t.get(store, {}) for t in (messages_t, units_t, index_t))
        units = all((m.get(n) or 0) == (u.get(n) or 0) for n in _UNIT_TALLIES)
        index = all((m.get(n) or 0) == (i.get(n) or 0) for n in _INDEX_TALLIES)
        out[store] = Settled(units, index, units and index and contiguous.get(store, False))
    return out


def _suspects(
    msgs: DataFrame, cq: DataFrame | None, index: DataFrame | None, cl_start: Mapping[str, Any],
    settled: Mapping[str, Settled] | None = None,
    spans: Mapping[str, IndexSpan | None] | None = None,
) -> DataFrame:
    """(sid, phy): the commitlog offsets where :func:`_exact` could find anything, from one
    hash aggregation of narrow rows (no string, no sort): a store number, the offset, whether
    the row is a message or a unit, and a signature, xxhash64 of (topic, queueId, queueOffset,
    size, tagsCode: :func:`message_tag`, :func:`unit_tag`), the message's and the units'
    alike; and the index entries' :func:`entries_hash` against those the message's keys give
    (with ``spans``, :func:`index_spans`: where messages get entries and their files' begin
    times); each XORed per offset.

    An offset is clear when exactly one message starts there, its entries' hashes XOR to the
    message's, and either one unit is there with the message's signature (XOR 0) or no unit
    is and its transaction type is never in a consume queue. (A unit or entry that differs
    from its message yet has the same 64-bit hash would go unreported: odds of 2^-64.) Units
    and index entries below their store's first commitlog offset are never findings and are
    left out here already.

    ``settled``: store -> what its tallies settled (:func:`settle`): those units, index entries
    and messages are left out (a store whose units are settled expects none).
    """
    settled = settled or {}

    def done(side: str) -> Column:
        names = [store for store, got in settled.items() if getattr(got, side)]
        return F.col("store").isin(*names) if names else F.lit(False)

    sid = _by_store({store: n for n, store in enumerate(cl_start)}, "int")
    here = F.col("commitLogOffset")
    known = _known(cl_start)

    def sig(tag: Column) -> Column:
        return F.xxhash64("topic", F.col("queueId").cast("int"),
                          F.col("queueOffset").cast("long"), F.col("storeSize").cast("int"), tag)

    zero = F.lit(0).cast("long")
    if spans is None or index is None:
        keys = zero
    else:  # the entries a message gives, unless its store's index side is settled
        keys = F.when(~done("index") & _indexed(spans), F.aggregate(
            _key_entry_hashes(spans), zero, lambda acc, h: acc.bitwiseXOR(h))).otherwise(zero)
    xi = {"m": keys, "u": zero,
          "i": entries_hash()}

    def narrow(df: DataFrame, kind: str) -> DataFrame:
        keep = ~done({"m": "messages", "u": "units", "i": "index"}[kind])
        # (no consume queue given, or its units settled: no unit is expected)
        exp = (F.when(done("units"), F.lit(0)).otherwise(
            gets_unit(F.col("sysFlag")).cast("int")) if kind == "m" and cq is not None
            else F.lit(0))
        return df.filter(keep if kind == "m" else keep & known).select(
            sid.alias("sid"), here.alias("phy"),
            F.lit(1 if kind == "m" else 0).alias("m"), F.lit(1 if kind == "u" else 0).alias("u"),
            exp.alias("exp"), (F.lit(0).cast("long") if kind == "i" else
                               sig(message_tag() if kind == "m" else unit_tag())).alias("sig"),
            xi[kind].alias("xi"),
        )

    rows = narrow(msgs, "m")
    if cq is not None:
        rows = rows.unionByName(narrow(cq, "u"))
    if index is not None:
        rows = rows.unionByName(narrow(index, "i"))
    g = rows.groupBy("sid", "phy").agg(
        F.sum("m").alias("nM"), F.sum("u").alias("nU"), F.max("exp").alias("exp"),
        F.bit_xor("sig").alias("x"), F.bit_xor("xi").alias("xi"))
    clear = (F.col("nM") == 1) & (F.col("xi") == 0) & (
        ((F.col("nU") == 0) & (F.col("exp") == 0))
        | ((F.col("nU") == 1) & (F.col("x") == 0)))
    return g.filter(~clear).select("sid", "phy")


GROUPS_PER_TASK = 1 << 19
"""About this many offsets per reduce task of the suspects' aggregation. Its hash map holds
every offset of its shuffle partition (about 100 bytes each, and a pointer array that doubles),
so the partitions grow in number with the store rather than in size: with Spark's few default
partitions the JVM's heap after collections went from 294 MiB at 2 GiB to 618 MiB at 8 GiB."""


def suspects_partitions(offsets: int, default: int) -> int:
    """Shuffle partitions for the suspects' aggregation of about ``offsets`` distinct
    commitlog offsets: :data:`GROUPS_PER_TASK` each, never fewer than ``default``."""
    return max(default, -(-max(offsets, 0) // GROUPS_PER_TASK))


_SUSPECTS_CONF = {
    # one job over every partition: a plain limit(n) collect reads one partition first (one
    # task, the other cores idle), then the rest in a second job; the suspects are usually
    # none, so every partition is read anyway
    "spark.sql.limit.initialNumPartitions": str(2**31 - 1),
    # the grouping key is a commitlog offset, nearly one per row: a partial aggregation before
    # the shuffle reduces nothing (pyspark 4.3 has the key; a version without it ignores it)
    "spark.sql.execution.bypassPartialAggregation": "true",
    # the partitions are sized to bound each reduce task's hash map (suspects_partitions):
    # adaptive execution would merge them back into a few large ones
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}


def _collect_at_most(df: DataFrame, n: int, offsets: int = 0) -> list[Row]:
    """At most ``n`` rows of the suspects ``df`` (:data:`_SUSPECTS_CONF` while they run),
    aggregated in partitions for about ``offsets`` distinct offsets
    (:func:`suspects_partitions`)."""
    conf = df.sparkSession.conf
    partitions = "spark.sql.shuffle.partitions"
    settings = {**_SUSPECTS_CONF, partitions: str(suspects_partitions(
        offsets, int(conf.get(partitions, "200") or 200)))}
    old = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        return df.limit(n).collect()
    finally:
        for key, value in old.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


def cross_file(
    msgs: DataFrame, cq: DataFrame | None, index: DataFrame | None,
    cl_start: Mapping[str, Any], qmin: DataFrame | None = None, offsets: int = 0,
    settled: Mapping[str, Settled] | None = None,
    spans: Mapping[str, IndexSpan | None] | None = None,
) -> list[dict[str, Any]]:
    """Consume-queue and index findings (FINDING_SCHEMA rows) of the messages' key columns,
    the consume-queue units and the index entries.

    Two steps, both exact: one hash aggregation of narrow rows finds the offsets where
    anything could be wrong (:func:`_suspects`; none in a clean store, and then that is all);
    :func:`_exact` then groups every row at those offsets (a broadcast list; every row when
    there are more than :data:`SUSPECTS_MAX`) and makes the findings.

    ``cl_start``: store -> the offset where its commitlog starts (None: no file).
    ``offsets``: about how many distinct commitlog offsets the three hold (the records or the
    units, whichever is more), which sizes the aggregation's partitions; 0: Spark's default.
    ``settled``: what each store's tallies settled (:func:`settle`): no job at all when they
    settled every store. ``spans``: :func:`index_spans` (read here when not given).
    """
    spark = msgs.sparkSession
    if index is not None and spans is None:
        spans = index_spans(cl_start)
    if settled and all(settled.get(s, UNSETTLED).messages for s in cl_start):
        return []
    found = _collect_at_most(_suspects(msgs, cq, index, cl_start, settled, spans),
                             SUSPECTS_MAX + 1, offsets)
    if not found:
        return []
    starts = commitlog_starts(spark, cl_start)
    if len(found) > SUSPECTS_MAX:
        return [r.asDict() for r in _exact(msgs, cq, index, starts, qmin).collect()]
    stores = list(cl_start)
    schema = StructType([StructField("store", StringType(), False),
                         StructField("commitLogOffset", LongType(), False)])
    keys = F.broadcast(spark.createDataFrame(
        [(stores[r["sid"]], r["phy"]) for r in found], schema))

    def only(df: DataFrame | None) -> DataFrame | None:
        return None if df is None else df.join(keys, _KEYS, "left_semi")

    return [r.asDict() for r in _exact(only(msgs), only(cq), only(index), starts, qmin)
            .collect()]


def _exact(
    msgs: DataFrame | None, cq: DataFrame | None, index: DataFrame | None, cl_start: DataFrame,
    qmin: DataFrame | None = None,
) -> DataFrame:
    """Consume-queue and index findings from **one** shuffle of the messages' key columns, the
    consume-queue units and the index entries together.

    The three are unioned as tagged rows and grouped by (store, commitLogOffset) in windows
    (one exchange, one sort; no join of the big sides, so each source is read once): every
    row learns the fields of the message at its offset, if any. A unit or index entry ("pointer")
    with no message there is ``cq-dangling`` or ``index-dangling``, a unit at another message
    than its own (topic, queue, queue offset or size), or at its own with a tagsCode that is
    not the message's tag hash or, in the schedule topic, a deliver time no delay gives from
    the message's store time (verify's unit rule; an address into ``consumequeue_ext`` is
    neither), is ``cq-mismatch``; an entry at a message whose keys give none of its keyHash,
    whose prevIndex names no earlier entry, or (not its file's first) whose timeDiff is not the
    message's store time less its file's beginTimestamp, is ``index-mismatch``; and a message
    with no unit that matches it exactly (topic, queue, queue offset) lacks its unit
    (``cq-missing``).
    Every finding comes out of one projection of that table.

    ``qmin`` (store, topic, queueId, minOffset): each queue's first unit (:func:`queue_mins`;
    required with ``cq``). ``cl_start`` (store, clMin): where each store's commitlog starts;
    units and entries below
    it are not findings (RocketMQ deletes commitlog files before the consume queues and index
    files that point into them). Not expected in a consume queue (so never ``cq-missing``):
    transaction PREPARED and ROLLBACK records, and messages below their queue's first unit.
    Both small sides are broadcast.
    """
    from pyspark.sql import Window

    none_s, none_i, none_l = (F.lit(None).cast(t) for t in ("string", "int", "long"))
    cols = ["topic", "queueId", "queueOffset", "storeSize", "sysFlag", "file", "fileOffset",
            "entry", "keyHash", "tagsCode", "storeTimestamp", "prevIndex", "keyHashes",
            "timeDiff", "beginTimestamp"]

    def tagged(df: DataFrame, tag: str, **given: Column) -> DataFrame:
        nulls = {"topic": none_s, "queueId": none_i, "queueOffset": none_l,
                 "storeSize": none_i, "sysFlag": none_i, "entry": none_i, "keyHash": none_i,
                 "tagsCode": none_l, "storeTimestamp": none_l, "prevIndex": none_i,
                 "keyHashes": F.lit(None).cast("array<int>"), "timeDiff": none_i,
                 "beginTimestamp": none_l}
        return df.select(*_KEYS, F.lit(tag).alias("tag"), *[
            given.get(c, F.col(c) if c in ("file", "fileOffset") else nulls[c]).alias(c)
            for c in cols])

    msg, unit = "m", CQ_DANGLING
    assert msgs is not None
    parts = [tagged(msgs, msg, **{c: F.col(c) for c in cols[:5]}, tagsCode=message_tag(),
                    storeTimestamp=F.col("storeTimestamp"), keyHashes=index_key_hashes())]
    if cq is not None:
        parts.append(tagged(cq, unit, **{c: F.col(c) for c in cols[:4]},
                            tagsCode=F.col("tagsCode").cast("long")))
    if index is not None:
        parts.append(tagged(index, INDEX_DANGLING, **{c: F.col(c) for c in (
            "entry", "keyHash", "prevIndex", "timeDiff", "beginTimestamp")}))
    rows = parts[0]
    for p in parts[1:]:
        rows = rows.unionByName(p)

    w = Window.partitionBy(*_KEYS)
    is_m = F.col("tag") == F.lit(msg)
    is_unit = F.col("tag") == F.lit(unit)
    rows = rows.select(
        "*", *[F.max(F.when(is_m, F.col(c))).over(w).alias(f"m_{c}")
               for c in ("topic", "queueId", "queueOffset", "storeSize", "tagsCode",
                         "storeTimestamp")],
        F.max(is_m.cast("int")).over(w).alias("hasM"),
        F.first(F.when(is_m, F.col("keyHashes")), ignorenulls=True).over(w)
        .alias("m_keyHashes"),
    )
    exact = (is_unit & (F.col("topic") == F.col("m_topic"))
             & (F.col("queueId") == F.col("m_queueId"))
             & (F.col("queueOffset") == F.col("m_queueOffset")))
    rows = rows.withColumn("anyExact", F.max(exact.cast("int")).over(w))

    here = F.col("commitLogOffset")
    has_m = F.col("hasM") == 1
    # inside the commitlog files, or impossible (a negative offset is never history)
    known = F.col("clMin").isNull() | (here >= F.col("clMin")) | (here < 0)
    dangling = ~is_m & ~has_m & known
    mismatch = is_unit & has_m & (~exact | (F.col("storeSize") != F.col("m_storeSize")))
    # the unit rule's tagsCode (mqtool.store.unit_check): the tag's hash, unless the unit
    # holds an address into consumequeue_ext; in the schedule topic a deliver time, which
    # must be a delay a broker writes after the message's store time
    own = is_unit & has_m & ~mismatch & (F.col("tagsCode") > F.lit(MAX_ADDR))
    schedule = F.col("topic") == F.lit(SCHEDULE_TOPIC)
    delay = schedule_unit_delay(F.col("tagsCode"), F.col("m_storeTimestamp"))
    tag_bad = own & ~schedule & (F.col("tagsCode") != F.col("m_tagsCode"))
    deliver_bad = own & schedule & ~delay_written(delay)
    # verify's entry rules (mqtool.integrity.indexcheck): a prevIndex naming an earlier entry,
    # a keyHash of one of the message's index keys, the timeDiff its store time gives
    is_entry = F.col("tag") == F.lit(INDEX_DANGLING)
    prev_bad = is_entry & has_m & prev_index_bad(F.col("prevIndex"), F.col("entry"))
    key_bad = (is_entry & has_m & ~prev_bad & ~F.array_contains(
        F.coalesce(F.col("m_keyHashes"), F.array().cast("array<int>")), F.col("keyHash")))
    time_given = index_time_diff(F.col("m_storeTimestamp"), F.col("beginTimestamp"))
    time_bad = (is_entry & has_m & ~prev_bad & ~key_bad
                & entry_time_checked(F.col("entry"), F.col("beginTimestamp"))
                & (F.col("timeDiff") != time_given))
    # a message below its queue's first unit: the queue was cut, not lost
    missing = (is_m & (F.col("anyExact") == 0) & gets_unit(F.col("sysFlag"))
               & (F.col("minOffset").isNull() | (F.col("queueOffset") >= F.col("minOffset"))))
    if cq is None:
        mismatch = missing = tag_bad = deliver_bad = F.lit(False)
        rows = rows.withColumn("minOffset", none_l)
    else:
        if qmin is None:
            raise ValueError("cross_file: qmin is required with cq")
        rows = rows.join(F.broadcast(qmin), ["store", "topic", "queueId"], "left")
    rows = rows.join(F.broadcast(cl_start), "store", "left")

    where = F.format_string("%s/%d@%d -> commitlog offset %d", F.col("topic"),
                            F.col("queueId"), F.col("queueOffset"), here)
    detail = (
        F.when(dangling & is_unit, F.concat(where, F.lit(": no message starts there")))
        .when(dangling, F.format_string(
            "entry %d (keyHash %d) -> commitlog offset %d: no message starts there",
            F.col("entry"), F.col("keyHash"), here))
        .when(mismatch, F.concat(where, F.format_string(
            " (size %d): the message there is %s/%d@%d (size %d)", F.col("storeSize"),
            F.col("m_topic"), F.col("m_queueId"), F.col("m_queueOffset"),
            F.col("m_storeSize"))))
        .when(tag_bad, F.concat(where, F.format_string(
            ": tagsCode %d is not the message's tag hash %d", F.col("tagsCode"),
            F.col("m_tagsCode"))))
        .when(prev_bad, F.format_string(
            "entry %d (keyHash %d) -> commitlog offset %d: prevIndex %d does not name an "
            "earlier entry", F.col("entry"), F.col("keyHash"), here, F.col("prevIndex")))
        .when(key_bad, F.format_string(
            "entry %d -> commitlog offset %d: keyHash %d is none of the message's index keys",
            F.col("entry"), here, F.col("keyHash")))
        .when(time_bad, F.format_string(
            "entry %d -> commitlog offset %d: timeDiff %d s, the message's store time gives "
            "%d s", F.col("entry"), here, F.col("timeDiff"), time_given))
        .when(deliver_bad, F.concat(where, F.format_string(
            ": tagsCode %d (the deliver time) is %d ms after the message's storeTimestamp, a "
            "delay no messageDelayLevel gives (whole seconds, at most 10 years)",
            F.col("tagsCode"), delay)))
        .otherwise(F.format_string(
            "message %s/%d@%d (%d bytes) has no consume-queue unit", F.col("topic"),
            F.col("queueId"), F.col("queueOffset"), F.col("storeSize")))
    )
    kind = (F.when(dangling, F.col("tag"))
            .when(mismatch | tag_bad | deliver_bad, F.lit(CQ_MISMATCH))
            .when(prev_bad | key_bad | time_bad, F.lit(INDEX_MISMATCH))
            .when(missing, F.lit(CQ_MISSING)))
    for k in (CQ_DANGLING, INDEX_DANGLING, CQ_MISMATCH, CQ_MISSING, INDEX_MISMATCH):
        _finding(k, here, here, here)  # every kind this audit makes is registered
    expected = (F.when(tag_bad, F.col("m_tagsCode").cast("string"))
                .when(deliver_bad, F.lit(DELIVER_EXPECTED))
                .when(time_bad, time_given.cast("string")))
    found = (F.when(tag_bad | deliver_bad, F.col("tagsCode").cast("string"))
             .when(time_bad, F.col("timeDiff").cast("string")))
    return rows.filter(kind.isNotNull()).select(*_finding(
        CQ_MISSING, F.col("file"), F.col("fileOffset"), detail, here, kind_col=kind,
        expected=expected, found=found))


def commitlog_starts(spark: SparkSession, starts: Mapping[str, int | None]) -> DataFrame:
    """(store, clMin): the commitlog offset of each store's first commitlog file."""
    schema = StructType([StructField("store", StringType(), False),
                         StructField("clMin", LongType(), True)])
    return spark.createDataFrame([(s, v) for s, v in starts.items()], schema)


def queue_mins(spark: SparkSession, queues: Iterable[Mapping[str, Any]]) -> DataFrame:
    """(store, topic, queueId, minOffset) of the collected
    :func:`mqtool.spark.audits.queue_facts` rows (a local table: no job to broadcast it)."""
    schema = StructType([StructField("store", StringType(), False),
                         StructField("topic", StringType(), True),
                         StructField("queueId", IntegerType(), True),
                         StructField("minOffset", LongType(), True)])
    return spark.createDataFrame(
        [(q["store"], q["topic"], q["queueId"], q["minOffset"]) for q in queues], schema)


def integrity(
    rare: Iterable[Mapping[str, Any]],
    records: DataFrame | None,
    cl_start: Mapping[str, int | None] | None = None,
    cq: DataFrame | None = None,
    index: DataFrame | None = None,
    qmin: DataFrame | None = None,
    extra: Iterable[tuple[str, Finding]] = (),
    offsets: int = 0,
    settled: Mapping[str, Settled] | None = None,
    spans: Mapping[str, IndexSpan | None] | None = None,
) -> list[dict[str, Any]]:
    """All integrity findings as FINDING_SCHEMA rows, ordered by store, file, offset and kind
    (None first, as Spark's orderBy).

    ``rare``: the rare rows of the commitlog pass (:func:`mqtool.spark.audits.fact_tables`:
    unreadable regions, BODYCRC failures); ``records``: the commitlog's records (their key
    columns: the cross-file check's own pass, nothing cached; the one Spark query here, run
    when ``cq`` or ``index`` is given); ``extra``: findings made on the driver (layout,
    config files); ``offsets``: about how many distinct commitlog offsets, ``settled``: what
    the tallies settled, ``spans``: :func:`index_spans` (all three :func:`cross_file`)."""
    out = record_findings(rare)
    if records is not None and cl_start is not None and (cq is not None or index is not None):
        out += cross_file(messages(records), cq, index, cl_start, qmin, offsets, settled, spans)
    out += [finding_row(store, f) for store, f in extra]
    return sorted(out, key=lambda r: tuple(
        (r[k] is not None, r[k]) for k in ("store", "file", "offset", "kind")))


def findings_table(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    """FINDING_SCHEMA rows (:func:`integrity`) as a DataFrame (``--out``, ``--sql``)."""
    return spark.createDataFrame(
        [tuple(r[k] for k in FINDING_COLUMNS) for r in rows], spark_schema(FINDING_SCHEMA)
    )
