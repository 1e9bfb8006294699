"""A RocksDB consume queue read without changing a byte (``storeType=defaultRocksDB``).

The database at ``store/consumequeue/`` (layout: :mod:`mqtool.formats.rocksdbcq`) is opened
read-only with ``rocksdict`` (RocksDB's ``OpenForReadOnly``: no lock is taken, so a running
broker may hold the store; the write-ahead log is replayed in memory only), through a private
temporary directory of symbolic links to its files, so that nothing is written beside them.
Keys that do not parse are findings naming the key; a directory RocksDB cannot open is one
finding naming the directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.formats.errors import Finding, FormatError

if TYPE_CHECKING:  # the layout is imported where a RocksDB queue is read
    from mqtool.formats.rocksdbcq import RocksUnit

RDICT_CONFIG = "rocksdict-config.json"  # what rocksdict writes beside a database it opens


class RocksOpenError(Exception):
    """A RocksDB database that cannot be opened read-only (the first line of RocksDB's status)."""


@contextmanager
def read_only(path: Path) -> Iterator[tuple[Any, list[str]]]:
    """The RocksDB database at ``path`` opened read-only (raw keys and values) with the names
    of its column families; every column family but ``default`` is opened too.

    rocksdict writes its own rocksdict-config.json beside any database it opens, read-only or
    not: it opens a private temporary directory of symbolic links to the database's files, so
    that nothing is written beside them. Raises :class:`RocksOpenError`.
    """
    import shutil
    import tempfile

    view = Path(tempfile.mkdtemp(prefix="mqtool-rocksdb-"))
    try:
        for p in path.iterdir():
            if p.is_file() and p.name != RDICT_CONFIG:
                (view / p.name).symlink_to(p.resolve())
        try:
            from rocksdict import AccessType, Options, Rdict

            opts = Options(raw_mode=True)
            cfs = Rdict.list_cf(str(view), opts)
            db: Any = Rdict(str(view), options=opts, access_type=AccessType.read_only(),
                            column_families={n: Options(raw_mode=True) for n in cfs
                                             if n != "default"})
        except Exception as e:  # rocksdict raises plain exceptions for every RocksDB Status
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise RocksOpenError(why.replace(str(view), str(path))) from e  # the real place
        try:
            yield db, list(cfs)
        finally:
            db.close()
    finally:
        shutil.rmtree(view, ignore_errors=True)


@dataclass
class RocksQueues:
    """The units of a RocksDB consume queue, read once into memory by queue."""

    rel: str  # the directory relative to the store root
    units: dict[tuple[str, int], list[tuple[int, RocksUnit]]] = field(default_factory=dict)
    offsets: dict[tuple[str, int, str], tuple[int, int]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    dispatched: int | None = None  # the highest commitlog offset the table holds units for

    @classmethod
    def open(cls, path: Path, rel: str) -> RocksQueues:
        from mqtool.formats.rocksdbcq import OFFSET_COLUMN_FAMILY

        rq = cls(rel)
        try:
            with read_only(path) as (db, cfs):
                rq._read_units(db)
                if OFFSET_COLUMN_FAMILY in cfs:
                    rq._read_offsets(db.get_column_family(OFFSET_COLUMN_FAMILY))
        except RocksOpenError as e:
            rq.findings.append(Finding(
                "cq", rel, None, f"RocksDB consume queue cannot be opened read-only: {e}"))
        for lst in rq.units.values():
            lst.sort(key=lambda u: u[0])
        return rq

    def _key_finding(self, key: bytes, e: FormatError, what: str) -> None:
        self.findings.append(Finding("cq", self.rel, None, f"{what} key {key.hex()}: {e.detail}",
                                     found=key.hex()))

    def _read_units(self, db: Any) -> None:
        from mqtool.formats.rocksdbcq import parse_unit_key, parse_unit_value

        for key, value in db.items():
            try:
                k = parse_unit_key(bytes(key))
                u = parse_unit_value(bytes(value))
            except FormatError as e:
                self._key_finding(bytes(key), e, "consume-queue unit")
                continue
            self.units.setdefault((k.topic, k.queue_id), []).append((k.queue_offset, u))

    def _read_offsets(self, cf: Any) -> None:
        from mqtool.formats.rocksdbcq import (
            CHECKPOINT_TOPIC,
            parse_checkpoint_value,
            parse_offset_key,
            parse_offset_value,
        )

        for key, value in cf.items():
            try:
                k = parse_offset_key(bytes(key))
                if k.topic == CHECKPOINT_TOPIC:  # the dispatched commitlog offset alone
                    self.dispatched = parse_checkpoint_value(bytes(value))
                    continue
                self.offsets[(k.topic, k.queue_id, k.which)] = parse_offset_value(bytes(value))
            except FormatError as e:
                self._key_finding(bytes(key), e, "queue offset")

    def queue_ids(self) -> list[tuple[str, int]]:
        return sorted(self.units)

    def queue_units(self, topic: str, queue_id: int, start: int = 0
                    ) -> Iterator[tuple[int, RocksUnit]]:
        for qoff, u in self.units.get((topic, queue_id), []):
            if qoff >= start:
                yield qoff, u

    def key_of(self, topic: str, queue_id: int, queue_offset: int) -> str:
        """The unit's RocksDB key in hex (where a finding about it points)."""
        from mqtool.formats.rocksdbcq import build_unit_key

        return build_unit_key(topic, queue_id, queue_offset).hex()
