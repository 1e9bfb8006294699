"""``mqtool repair``: a repaired copy of a store that keeps every record and unit RocketMQ's own
recovery keeps of it, and refuses when it cannot write one RocketMQ would start on.
``mqtool repair`` (:mod:`mqtool.cli.repair`) is its command line.

The source store is only read. The copy is built in a temporary directory beside ``--out``,
every file fsynced, then renamed into place, so ``--out`` is either absent or complete; it keeps
the holes of sparse files (and makes holes of zero runs: a pre-allocated file costs nothing).
What changes (each change is listed with file, offset, before -> after):

* the commitlog files' layout first (:mod:`mqtool.integrity.layout`): a file is put where its
  records say it belongs (renamed), a copy of another file's records and stray entries are left
  out, a file cut short is padded; when that cannot be done safely (two different files for the
  same place, a file cut short before other data with units pointing into what it lost, a file
  longer than the others holding data past their size) repair says why in one line and writes
  nothing. Missing files stay missing, and the units pointing into them are kept (RocketMQ keeps
  them and skips them when it serves);
* commitlog: the valid data ends where RocketMQ's recovery stops (``processOffset``, see
  :mod:`mqtool.integrity.recovery`); the bytes after it in that file are zeroed and later files
  are left out (``truncateDirtyFiles`` deletes them). A record RocketMQ's recovery reads past
  (torn properties) is kept, as the broker keeps it, and reported;
* consume queues: units from the first impossible unit on, and the tail of units pointing at or
  past the valid end, are dropped (``ConsumeQueue#recover`` / ``truncateDirtyLogicFiles``);
  a unit in the middle that points at another queue's record is rewritten from the record that
  holds its queue offset, and units of readable records missing at a queue's tail are
  re-dispatched (what ``recoverAbnormally`` does). A unit RocketMQ keeps stays as it is, also
  when it points at no readable record or into a missing file, and when only its tagsCode
  disagrees with the record's TAGS (no CRC covers the properties in 4.x: which side is damaged
  is unknown, and the original tag must still find the message): such units are reported;
* index files with entries that point past the valid end or at no record are rebuilt from the
  commitlog records they cover (``IndexService#buildIndex``; same name and geometry), each
  record with the key hashes its entries held (an entry whose key hash is none of its record's
  keys is never rewritten to the record's possibly damaged UNIQ_KEY or KEYS: it is reported);
* configs: an empty or garbled file is replaced by its ``.bak`` (what ``ConfigManager#load``
  loads), delay offsets beyond a schedule queue's max are clamped to it (5.x
  ``ScheduleMessageService#correctDelayOffset``), consumer offsets beyond a queue's max likewise;
* checkpoint timestamps after the last kept record are set to it (offsets clamped to the valid
  end);
  the ``abort`` file is not copied (the copy is a cleanly stopped store);
* 5.x timer files: the timerlog is truncated at the first unit whose record is past the valid
  end, wheel slots leading into the dropped part are rebuilt, ``config/timercheck`` and
  ``config/timermetrics`` follow (:func:`mqtool.integrity.timerrepair.plan_timer_repair`).

Damage before the point where RocketMQ's recovery starts reading is left as it is (the broker
keeps it too); it is listed as not repaired, and so is every unit or record kept as RocketMQ
keeps it although it is damaged (repair then exits 1).
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.buffers import close_map
from mqtool.formats.checkpoint import build_checkpoint
from mqtool.formats.commitlog import BORNHOST_V6_FLAG
from mqtool.formats.config import build_consumer_offset, build_delay_offset
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.consumequeue import CQ_UNIT_STRUCT as _UNIT
from mqtool.formats.errors import (
    MqtoolError,
    Severity,
    TornPropertiesError,
    environment,
    failed_path,
    usage,
)
from mqtool.formats.indexfile import INDEX_ENTRY_DTYPE, index_key_hash
from mqtool.formats.rules import SCHEDULE_TOPIC, TIMER_TOPIC, schedule_unit_delay
from mqtool.formats.store_dirs import special_parts
from mqtool.formats.walker import data_extents, nonzero_end
from mqtool.integrity import dispatch_rules
from mqtool.integrity.checks import QueueScan, Report, verify
from mqtool.integrity.layout import Layout, blank_record, missing_names, plan_layout
from mqtool.integrity.recovery import cut_position, queue_cut
from mqtool.integrity.timerrepair import plan_timer_repair
from mqtool.store.files import map_readonly
from mqtool.store.reader import Store


class RepairError(MqtoolError):
    """A repair that cannot be done as asked (output exists, source unreadable, ...)."""


@dataclass(frozen=True)
class Change:
    file: str
    offset: int | None
    before: str
    after: str

    def __str__(self) -> str:
        where = self.file if self.offset is None else f"{self.file} @ {self.offset:#x}"
        return f"{where}: {self.before} -> {self.after}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "before": self.before,
                "after": self.after}


@dataclass
class RepairResult:
    source: Path  # the store root repaired
    out: Path | None
    cut_at: int
    changes: list[Change]
    not_repaired: list[str]
    report: Report

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.source),
                "out": None if self.out is None else str(self.out), "cutAt": self.cut_at,
                "changes": [c.to_json() for c in self.changes],
                "notRepaired": self.not_repaired}


def _refuse_special(src: Path) -> None:
    """Repair rewrites only what it fully understands: a store with 5.x options it does not
    (RocksDB queues or metadata, DLedger, batch or LMQ queues, CQ ext) is refused, untouched."""
    with Store.open(src) as st:
        root = st.root
    kinds = list(special_parts(root).values())
    if kinds:
        raise RepairError(f"{root}: repair refuses to rewrite a store with {'; '.join(kinds)}: "
                          "mqtool reads and verifies it but does not know every rule RocketMQ "
                          "keeps for it; nothing was written")


def _check_out(out: Path, src: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise usage(RepairError(
                f"--out {out}: exists and is not a directory (give a new directory)"))
        if any(out.iterdir()):
            raise usage(RepairError(
                f"--out {out}: exists and is not empty; repair never overwrites"))
    try:
        if out.resolve().is_relative_to(src.resolve()):
            raise usage(RepairError(
                f"--out {out}: inside the source store {src}; give a place outside it"))
    except OSError:
        pass
    if not out.parent.is_dir():
        raise usage(RepairError(f"--out {out}: no such directory {out.parent}"))


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_CHUNK = 1 << 20
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ZEROS = bytes(_CHUNK)


def _copy_sparse(src: Path, dst: Path) -> None:
    """Copy a file keeping its holes and making holes of its zero runs (``cp --sparse=always``):
    only the data extents are read (SEEK_DATA), only non-zero chunks written."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        for lo, hi in data_extents(fi.fileno(), 0, size):
            fi.seek(lo)
            pos = lo
            while pos < hi:
                chunk = fi.read(min(_CHUNK, hi - pos))
                if not chunk:
                    break
                if chunk != _ZEROS[: len(chunk)]:
                    fo.seek(pos)
                    fo.write(chunk)
                pos += len(chunk)
        fo.truncate(size)
    shutil.copystat(src, dst)


def _write_sparse(path: Path, data: bytes | bytearray) -> None:
    """Write ``data`` as the whole file, its zero chunks as holes."""
    with open(path, "wb") as f:
        view = memoryview(data)
        for pos in range(0, len(data), _CHUNK):
            chunk = view[pos : pos + _CHUNK]
            if chunk != _ZEROS[: len(chunk)]:
                f.seek(pos)
                f.write(chunk)
        f.truncate(len(data))


def _zero(path: Path, start: int, end: int) -> None:
    """Zero ``[start, end)`` of ``path``; a tail to the end of the file becomes a hole."""
    size = path.stat().st_size
    if end >= size:
        os.truncate(path, start)
        os.truncate(path, size)
        return
    with open(path, "r+b") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            n = min(left, _CHUNK)
            f.write(_ZEROS[:n])
            left -= n


def _zeros_from(path: Path, pos: int) -> bool:
    """Whether every byte of ``path`` from ``pos`` on is zero."""
    buf = map_readonly(path)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            return nonzero_end(buf, pos, fd=fd) <= pos
        finally:
            os.close(fd)
    finally:
        if not isinstance(buf, bytes):
            close_map(buf)


def _store_time(store: Store, phy: int) -> int:
    """STORETIMESTAMP of the record at ``phy``, read from its header alone (for a record whose
    properties mqtool cannot decode)."""
    f = store.file_for(phy)
    if f is None:
        return 0
    buf = store.mapped(f)
    pos = phy - f.start
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    return int(_I64.unpack_from(buf, pos + 48 + born)[0])  # after BORNTIMESTAMP, BORNHOST


def _patch(path: Path, offset: int | None, data: bytes) -> None:
    """Write ``data`` at ``offset`` of ``path`` (None: ``data`` is the whole file)."""
    if offset is None:
        path.write_bytes(data)
        return
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@contextmanager
def _layout_view(root: Path, layout: Layout, near: Path | None) -> Iterator[Path]:
    """The store as the repaired copy lays out its commitlog files: ``root`` itself when the
    layout changes nothing, else a temporary directory (beside ``near``) of symbolic links to
    the source's files, the commitlog files under the names their records give them, padded or
    cut files written out (sparse). Only read; removed afterwards."""
    if not layout.changed:
        yield root
        return
    view = Path(tempfile.mkdtemp(prefix=".mqtool-repair-view-", dir=near))
    try:
        for dirpath, _dirs, files in os.walk(root):
            rel_dir = Path(dirpath).relative_to(root)
            if rel_dir.parts[:1] == ("commitlog",):
                continue
            (view / rel_dir).mkdir(parents=True, exist_ok=True)
            for name in files:  # absolute targets: the view lives elsewhere
                os.symlink(Path(dirpath, name).absolute(), view / rel_dir / name)
        cl = view / "commitlog"
        cl.mkdir(exist_ok=True)
        for f in layout.files:
            dst = view / f.rel
            if f.copied_as_is:
                os.symlink(f.path.absolute(), dst)
                continue
            _copy_sparse(f.path, dst)
            if f.cut_to is not None:
                os.truncate(dst, f.cut_to)
            if f.pad_to is not None:
                os.truncate(dst, f.pad_to)
                if f.blank_at is not None:
                    _patch(dst, f.blank_at, blank_record(f.pad_to - f.blank_at))
        yield view
    finally:
        shutil.rmtree(view, ignore_errors=True)


class _Plan:
    """Changes computed from the verify report, applied to a copy (or only listed)."""

    def __init__(self, r: Report, layout: Layout) -> None:
        self.r = r
        self.layout = layout
        self.start, self.cut = cut_position(r)
        # the commitlog position RocketMQ's recovery starts reading from
        self.recovery_start = (r.files[self.start].file.start if self.start < len(r.files)
                               else self.cut)
        self.changes: list[Change] = []
        self.not_repaired: list[str] = []
        self.skip: set[str] = set()  # files (rel) not to copy
        self.actions: list[Any] = []  # callables taking the copy root
        self.queue_end: dict[tuple[str, int], int] = {}  # max offset after the repair
        # (min offset, units) after the repair, for the timer topic's queues
        self.queue_units: dict[tuple[str, int], tuple[int, list[tuple[int, int, int]]]] = {}
        self.gap_units: Counter[tuple[int, int]] = Counter()  # units kept pointing into a gap
        self.units_end = 0  # where the kept units' records end, at most (maxPhysicOffset)
        # records with torn properties RocketMQ's recovery keeps (mqtool does not decode them)
        self.torn = {f.phy for f in r.findings
                     if f.kind == TornPropertiesError.kind and f.phy is not None}

    def note(self, file: str, offset: int | None, before: str, after: str) -> None:
        self.changes.append(Change(file, offset, before, after))

    # -- commitlog ---------------------------------------------------------------------
    def commitlog(self) -> None:
        r, cut = self.r, self.cut
        for s in r.files:
            f = s.file
            if f.start > cut:
                self.skip.add(f.rel)
                what = (f"{s.messages} messages, {s.unreadable_bytes} unreadable bytes"
                        if s.messages or s.unreadable_bytes else "never written (all zero)")
                self.note(f.rel, None, f"file of {f.size} bytes ({what})",
                          "left out (past the valid end; truncateDirtyFiles deletes it)")
            elif cut < f.start + f.size:
                trivial = (s.end_kind == "zeros" and cut >= s.data_end
                           and _zeros_from(f.path, cut - f.start)) or (
                    s.end_kind == "blank" and s.first_break is None and cut >= s.data_end)
                if not trivial:
                    pos = cut - f.start
                    lost = int(np.count_nonzero(r.messages.phy[
                        (r.messages.phy >= cut) & (r.messages.phy < f.start + f.size)]))
                    self.note(f.rel, pos, f"{f.size - pos} bytes after the valid end "
                              f"({lost} readable messages among them)", "zeroed")
                    self.actions.append(lambda root, f=f, pos=pos: _zero(
                        root / f.rel, pos, f.size))
        # damage RocketMQ's recovery does not read (before its start file) stays
        for s in r.files[: self.start]:
            bad = s.first_break
            if bad is not None and bad < s.file.start + s.file.size and (
                    s.end_kind != "zeros" or s.unreadable_bytes):
                self.not_repaired.append(
                    f"{s.file.rel} @ {bad - s.file.start:#x}: unreadable data before "
                    "the file RocketMQ's recovery starts from; the broker keeps it, so does "
                    "the copy")
        # a record whose properties are torn: the recovery reads past it (it checks the body
        # CRC, and no property byte unless 5.x forceVerifyPropCRC), the broker keeps it
        for x in r.findings:
            if x.kind == TornPropertiesError.kind and x.phy is not None and x.phy < cut:
                self.not_repaired.append(
                    f"{x.file} @ {x.offset or 0:#x}: a record whose properties are torn; "
                    "RocketMQ's recovery reads past it and keeps it, so does the copy")

    # -- consume queues ----------------------------------------------------------------
    def reput_stop(self) -> str | None:
        """Why RocketMQ would never finish starting on the copy, if it would not: its reput
        service dispatches the log from where the consume queues end (the largest
        ``maxPhysicOffset``) and stops for good at an offset no file holds, and
        ``DefaultMessageStore.start`` waits for it to reach the end of the log."""
        start = max(self.units_end, self.r.files[0].file.start if self.r.files else 0)
        for lo, hi in self.layout.gaps:
            if start < hi and lo < self.cut:
                names = list(missing_names(lo, hi, self.layout.file_size or hi - lo))
                return (f"{names[0]} is missing and the consume queues end before it (at "
                        f"commitlog offset {start:,}) while records follow it: RocketMQ's reput "
                        "service would stop at the missing file and the broker never finish "
                        "starting (DefaultMessageStore.start waits for the dispatch); repair "
                        "cannot rebuild what the missing file held; nothing written")
        return None

    def queues(self) -> None:
        m = self.r.messages
        for q in self.r.queues:
            self._queue(q, m)
        for lo, hi in self.layout.gaps:
            if lo >= self.cut:
                continue
            names = list(missing_names(lo, hi, self.layout.file_size or hi - lo))
            n = self.gap_units[(lo, hi)]
            self.not_repaired.append(
                f"{names[0]}{f' .. {names[-1]}' if len(names) > 1 else ''}: missing "
                f"(commitlog offset {lo:,} to {hi:,}): its records are lost; RocketMQ loads "
                f"the store without it, keeps the {n:,} consume-queue unit{'s' * (n != 1)} "
                "pointing into it and skips them when it serves; so does the copy")

    def _queue(self, q: QueueScan, m: Any) -> None:
        if not q.files:
            return
        keep = queue_cut(q.phys, q.sizes, self.cut)
        topic_idx = m.topics.index(q.topic) if q.topic in m.topics else -1
        sel = np.flatnonzero((m.topic == topic_idx) & (m.queue_id == q.queue_id)
                             & (m.phy < self.cut)
                             & dispatch_rules.expected_in_cq(m.sys_flag)) if topic_idx >= 0 else (
            np.zeros(0, np.int64))
        by_qoff = {int(m.queue_offset[i]): int(i) for i in sel.tolist()}
        # schedule queues: tagsCode = deliver time = store time + the level's delay (evidence;
        # a unit whose deliver time no level gives is one of q.bad, by the unit rule)
        delta = None
        if q.topic == SCHEDULE_TOPIC and q.units:
            ds = [schedule_unit_delay(int(q.tags[i]), int(m.store_ts[by_qoff[int(q.offsets[i])]]))
                  for i in range(min(keep, q.units)) if int(q.offsets[i]) in by_qoff
                  and int(q.offsets[i]) not in q.bad]
            delta = max(set(ds), key=ds.count) if ds else None
        units: list[tuple[int, int, int]] = []
        for i in range(keep):
            lo = int(q.offsets[i])
            kept = (int(q.phys[i]), int(q.sizes[i]), int(q.tags[i]))
            unit: tuple[int, int, int] | None = kept
            if lo in q.bad:
                row = by_qoff.get(lo)
                where = f"consumequeue/{q.topic}/{q.queue_id} offset {lo}"
                gap = self.layout.gap_of(kept[0])
                if gap is not None:
                    # into a missing file: RocketMQ keeps the unit and skips it when it serves
                    self.gap_units[gap] += 1
                    units.append(kept)
                    continue
                if row is not None and (int(m.phy[row]), int(m.size[row])) == kept[:2]:
                    # the unit points at its record; only its tagsCode is wrong
                    if q.topic == SCHEDULE_TOPIC:
                        # a deliver time no level gives: the level's delay from the queue's
                        # other units, as the reput service writes it
                        rebuilt = self._unit_for(row, q, m, delta, None)
                        if rebuilt is None:
                            self.not_repaired.append(
                                f"{where}: tagsCode {kept[2]} (the deliver time) is no delay "
                                "level's from its record's storeTimestamp, and no other unit of "
                                "the queue gives the level's delay: RocketMQ keeps the unit, so "
                                "does the copy")
                        units.append(rebuilt or kept)
                        continue
                    # it is not the hash of the record's TAGS, and no CRC says which side is
                    # damaged: left as it is
                    self.not_repaired.append(
                        f"{where}: tagsCode {kept[2]} is not the hash of the TAGS of its record "
                        f"(phy {kept[0]}, whose TAGS hash to {int(m.tags_code[row])}): the "
                        "record's TAGS or the unit is damaged; RocketMQ keeps both, so does "
                        "the copy (a unit is never rewritten to match damaged properties)")
                    units.append(kept)
                    continue
                if row is None:
                    # no readable record holds this queue offset: RocketMQ keeps the unit
                    # (ConsumeQueue#recover stops only at an impossible one) and serves the
                    # units after it, so does the copy
                    self.not_repaired.append(
                        f"{where}: points at unreadable data (phy {kept[0]})"
                        + (" before the file RocketMQ's recovery starts from"
                           if kept[0] < self.recovery_start else "")
                        + "; RocketMQ keeps the unit, so does the copy")
                    units.append(kept)
                    continue
                unit = self._unit_for(row, q, m, delta, int(q.tags[i]))
            if unit is None:
                break
            units.append(unit)
        # re-dispatch readable records missing at the tail
        nxt = q.min_offset + len(units)
        while nxt in by_qoff:
            extra = self._unit_for(by_qoff[nxt], q, m, delta, None)
            if extra is None:
                break
            units.append(extra)
            nxt += 1
        old = [(int(a), int(b), int(c)) for a, b, c in zip(
            q.phys.tolist(), q.sizes.tolist(), q.tags.tolist(), strict=True)]
        self.queue_end[(q.topic, q.queue_id)] = q.min_offset + len(units)
        self.units_end = max([self.units_end] + [p + n for p, n, _ in units if n > 0])
        if q.topic == TIMER_TOPIC:
            self.queue_units[(q.topic, q.queue_id)] = (q.min_offset, units)
        if units == old:
            return
        self._rewrite_queue(q, units, old)

    def _unit_for(self, row: int, q: QueueScan, m: Any, delta: int | None,
                  old_tags: int | None) -> tuple[int, int, int] | None:
        phy, size = int(m.phy[row]), int(m.size[row])
        if dispatch_rules.tags_code_is_tag_hash(q.topic):
            return phy, size, int(m.tags_code[row])
        if delta is not None:
            return phy, size, int(m.store_ts[row]) + delta
        if old_tags is not None:
            return phy, size, old_tags
        return None

    def _rewrite_queue(self, q: QueueScan, units: list[tuple[int, int, int]],
                       old: list[tuple[int, int, int]]) -> None:
        per_file = q.file_size // CQ_STORE_UNIT_SIZE
        if per_file <= 0:
            self.not_repaired.append(f"{q.files[0][0]}: cannot tell the file size")
            return
        first = q.min_offset
        end_logical = first + len(units)
        for i, u in enumerate(units):
            lo = first + i
            if i < len(old) and old[i] == u:
                continue
            fb = lo - lo % per_file
            rel = f"consumequeue/{q.topic}/{q.queue_id}/{fb * CQ_STORE_UNIT_SIZE:020d}"
            pos = (lo - fb) * CQ_STORE_UNIT_SIZE
            before = (f"unit {old[i][0]}/{old[i][1]}/{old[i][2]}" if i < len(old)
                      else "no unit")
            self.note(rel, pos, before, f"unit {u[0]}/{u[1]}/{u[2]}")
        if len(old) > len(units):
            lo = end_logical
            fb = lo - lo % per_file
            rel = f"consumequeue/{q.topic}/{q.queue_id}/{fb * CQ_STORE_UNIT_SIZE:020d}"
            self.note(rel, (lo - fb) * CQ_STORE_UNIT_SIZE,
                      f"{len(old) - len(units)} units (offsets {lo}..{first + len(old) - 1})",
                      "dropped (zeroed)")
        qdir_rel = f"consumequeue/{q.topic}/{q.queue_id}"
        # a file none of whose units is kept is left out, never written back all zero: RocketMQ's
        # truncateDirtyLogicFiles keeps unit 0 of a queue's last file whenever its offset (0) is
        # below the log's end, whatever its size, and would serve a phantom unit (phy 0, size 0);
        # its own recovery of the damaged store deletes that file (deleteLastMappedFile)
        keep_files = {rel for rel, base, _ in q.files
                      if base <= end_logical * CQ_STORE_UNIT_SIZE - 1}
        for rel, _base, _size in q.files:
            if rel not in keep_files:
                self.skip.add(rel)
                self.note(rel, None, "consume-queue file past the queue's end", "left out")

        def apply(root: Path) -> None:
            data: dict[int, bytearray] = {}
            for rel, base, _size in q.files:
                if rel in keep_files:
                    data[base] = bytearray(q.file_size)
            for i, u in enumerate(units):
                byte = (first + i) * CQ_STORE_UNIT_SIZE
                fb = byte - byte % q.file_size
                buf = data.get(fb)
                if buf is None:
                    buf = data[fb] = bytearray(q.file_size)
                _UNIT.pack_into(buf, byte - fb, *u)
            d = root / qdir_rel
            d.mkdir(parents=True, exist_ok=True)
            for base, buf in data.items():
                (d / f"{base:020d}").write_bytes(bytes(buf))

        self.actions.append(apply)

    # -- index -------------------------------------------------------------------------
    def _held_keys(self, ix: Any, bad: set[int]) -> dict[int, list[int]]:
        """The records whose entries in ``ix`` stay as they are: those holding a key hash that
        is none of the record's index keys (each reported; none is rewritten), and those of a
        record with torn properties (RocketMQ keeps it): phy -> the hashes the entries at that
        phy hold (in entry order), of the entries ``bad`` (not past the cut)."""
        m = self.r.messages
        if ix.path is None or not bad:
            return {}
        e = np.fromfile(ix.path, dtype=INDEX_ENTRY_DTYPE, count=ix.entries,
                        offset=ix.entry_start)
        hs, ps = e["h"].astype(np.int64), e["p"].astype(np.int64)
        kr = m.key_rows
        held: dict[int, list[int]] = {}
        for n in sorted(bad):
            phy, h = int(ps[n - 1]), int(hs[n - 1])
            if phy in self.torn:  # a record RocketMQ keeps (mqtool cannot decode it)
                held[phy] = [int(x) for x in hs[ps == phy].tolist()]
                continue
            row = m.at(phy) if phy < self.cut else None
            if row is None:
                continue
            lo, hi = np.searchsorted(kr, [row << 31, (row + 1) << 31])
            if h in set((kr[lo:hi] & 0x7FFFFFFF).tolist()):
                continue  # the key is the record's: the entry is bad for another reason
            held[phy] = [int(x) for x in hs[ps == phy].tolist()]
            self.not_repaired.append(
                f"{ix.rel} entry {n} -> commitlog offset {phy}: keyHash {h} is none of its "
                "record's index keys (UNIQ_KEY, KEYS): the record's keys or the entry is "
                "damaged and no CRC says which; RocketMQ keeps the entry, so does the copy (an "
                "entry is never rewritten to match damaged properties)")
        return held

    def index(self, src: Store) -> None:
        r = self.r
        prev_end_ts = 0
        prev_end_phy = 0
        for ix in r.indexes:
            if not ix.readable:
                self.skip.add(ix.rel)
                self.note(ix.rel, None, "unreadable index file", "left out (lookups fall back "
                          "to the commitlog; RocketMQ rebuilds no entries for it)")
                self.not_repaired.append(f"{ix.rel}: unreadable index file left out")
                continue
            past = {int(i) + 1 for i in np.flatnonzero(ix.phys >= self.cut).tolist()}
            held = self._held_keys(ix, set(ix.bad_entries) - past)
            bad = sorted(n for n in set(ix.bad_entries) | past
                         if n in past or int(ix.phys[n - 1]) not in held)
            if not bad:
                prev_end_ts, prev_end_phy = ix.end_timestamp, int(ix.phys.max(initial=0))
                continue
            good = np.array([n for n in range(1, ix.entries + 1) if n not in set(bad)],
                            dtype=np.int64)
            gphys = ix.phys[good - 1] if good.size else np.zeros(0, np.int64)
            m = r.messages
            lo = int(gphys.min()) if gphys.size else None
            hi = int(gphys.max()) if gphys.size else None
            hashes: list[int] = []
            offs: list[int] = []
            stamps: list[int] = []
            if lo is not None and hi is not None:
                rows = np.flatnonzero((m.phy >= lo) & (m.phy <= hi) & (m.phy < self.cut))
                undecoded = [p for p in held if lo <= p <= hi and m.at(p) is None]
                for phy in sorted(set(m.phy[rows].tolist()) | set(undecoded)):
                    msg = src.try_message_at(phy)
                    if msg is None:  # a record RocketMQ keeps, its entries as they were
                        for h in held.get(phy, []):
                            hashes.append(h)
                            offs.append(phy)
                            stamps.append(_store_time(src, phy))
                        continue
                    if (msg.sys_flag & dispatch_rules.TRANSACTION_TYPE_MASK) == (
                            dispatch_rules.NOT_IN_CONSUME_QUEUE[1]):
                        continue
                    kept = held.get(phy)
                    for h in kept if kept is not None else (
                            index_key_hash(k) for k in dispatch_rules.index_keys(msg.topic,
                                                                        msg.properties)):
                        hashes.append(h)
                        offs.append(phy)
                        stamps.append(msg.store_timestamp)
            if not hashes:
                self.skip.add(ix.rel)
                self.note(ix.rel, None, f"{ix.entries} entries, none pointing at a kept record",
                          "left out")
                continue
            self.note(ix.rel, None, f"{ix.entries} entries ({len(bad)} damaged or past the "
                      "valid end)", f"rebuilt from the commitlog: {len(hashes)} entries")
            geo = (ix.hash_slot_num, ix.index_num)
            start = (prev_end_phy, prev_end_ts)

            def apply(root: Path, rel: str = ix.rel, geo: tuple[int, int] = geo,
                      start: tuple[int, int] = start, h: list[int] = hashes,
                      o: list[int] = offs, t: list[int] = stamps) -> None:
                from mqtool.refstore.mapped import IndexFileWriter

                path = root / rel
                path.unlink()
                w = IndexFileWriter(path, geo[0], geo[1], create=True, end_phy_offset=start[0],
                                    end_timestamp=start[1])
                try:
                    done = 0
                    while done < len(h):
                        n = w.put_many(h, o, t, done)
                        if n == 0:
                            break
                        done += n
                    w.mf.flush()
                finally:
                    w.mf.close()

            self.actions.append(apply)
            prev_end_ts, prev_end_phy = stamps[-1], offs[-1]

    # -- 5.x timer files ---------------------------------------------------------------
    def timer(self) -> None:
        """timerlog, timerwheel, timercheck, timermetrics: see :mod:`mqtool.integrity.timerrepair`
        (the timerlog is truncated at the first unit whose record is past the cut)."""
        fix = plan_timer_repair(self.r.root, self.cut, self.queue_units.get((TIMER_TOPIC, 0)))
        if fix is None:
            return
        for file, offset, before, after in fix.notes:
            self.note(file, offset, before, after)
        self.not_repaired.extend(fix.not_repaired)
        self.skip.update(fix.leave_out)
        for rel, start, end in fix.zeros:
            self.actions.append(lambda root, rel=rel, start=start, end=end: _zero(
                root / rel, start, end))
        for rel, offset, data in fix.writes:
            self.actions.append(lambda root, rel=rel, offset=offset, data=data: _patch(
                root / rel, offset, data))

    # -- configs, checkpoint -------------------------------------------------------------
    def configs(self) -> None:
        r = self.r
        newmax = {(q.topic, q.queue_id): q.max_offset for q in r.queues}
        newmax.update(self.queue_end)
        for name, cl in r.configs.items():
            rel = f"config/{name}"
            text = cl.text
            value = cl.value
            changed = False
            if cl.from_bak and text is not None:
                self.note(rel, 0, "empty or unreadable", f"content of {rel}.bak")
                changed = True
            elif cl.source is None and cl.findings:
                self.not_repaired.append(f"{rel}: neither it nor its .bak can be read")
                continue
            if name == "delayOffset.json" and value is not None:
                table = dict(value.offset_table)
                for level, off in sorted(table.items()):
                    mx = newmax.get((SCHEDULE_TOPIC, level - 1), 0)
                    if off > mx:
                        self.note(rel, None, f"level {level} offset {off}", f"{mx} (queue max)")
                        table[level] = mx
                        changed = True
                if changed:
                    text = build_delay_offset(replace(value, offset_table=table))
            if name in ("consumerOffset.json", "lmqConsumerOffset.json") and value is not None:
                tables = {}
                for key, t in value.offset_table.items():
                    topic, _group = value.topic_group(key)
                    nt = dict(t)
                    for qid, off in t.items():
                        qmax = newmax.get((topic, qid))
                        if qmax is not None and off > qmax:
                            self.note(rel, None, f"{key} queue {qid} offset {off}",
                                      f"{qmax} (queue max)")
                            nt[qid] = qmax
                            changed = True
                    tables[key] = nt
                if changed:
                    text = build_consumer_offset(replace(value, offset_table=tables))
            if changed and text is not None:
                self.actions.append(lambda root, rel=rel, text=text: (root / rel).write_text(
                    text, "utf-8"))

    def checkpoint(self) -> None:
        r = self.r
        cp = r.checkpoint
        if cp is None:
            return
        m = r.messages
        kept = m.phy < self.cut
        last_ts = int(m.store_ts[kept].max()) if kept.any() else 0
        # a timestamp behind the data only makes recovery re-read more; one ahead of it claims
        # records that are not there
        new = replace(
            cp, physic_msg_timestamp=min(cp.physic_msg_timestamp, last_ts),
            logics_msg_timestamp=min(cp.logics_msg_timestamp, last_ts),
            index_msg_timestamp=min(cp.index_msg_timestamp, last_ts),
            master_flushed_offset=min(cp.master_flushed_offset, self.cut),
            confirm_phy_offset=min(cp.confirm_phy_offset, self.cut),
        )
        if new != cp:
            for pos, name, a, b in (
                (0, "physicMsgTimestamp", cp.physic_msg_timestamp, new.physic_msg_timestamp),
                (8, "logicsMsgTimestamp", cp.logics_msg_timestamp, new.logics_msg_timestamp),
                (16, "indexMsgTimestamp", cp.index_msg_timestamp, new.index_msg_timestamp),
                (24, "masterFlushedOffset", cp.master_flushed_offset, new.master_flushed_offset),
                (32, "confirmPhyOffset", cp.confirm_phy_offset, new.confirm_phy_offset),
            ):
                if a != b:
                    self.note("checkpoint", pos, f"{name} {a}", str(b))
            data = build_checkpoint(new)
            self.actions.append(lambda root: (root / "checkpoint").write_bytes(data))


def repair(src: str | Path, out: str | Path | None, *, dry_run: bool = False) -> RepairResult:
    """Write a repaired copy of ``src`` at ``out`` (never touching ``src``); with ``dry_run``
    only list the changes. RepairError (nothing written) when no copy RocketMQ would start on
    can be written."""
    _refuse_special(Path(src))
    with Store.open(src) as st:
        root = Path(st.root)
        layout = plan_layout(st)
    if layout.refusal is not None:
        raise RepairError(f"{root}: {layout.refusal}")
    outp = None if dry_run or out is None else Path(out)
    if outp is not None:
        _check_out(outp, root)
    with _layout_view(root, layout, None if outp is None else outp.parent) as view:
        plan = _plan(view, layout)
        stop = plan.reput_stop()
        if stop is not None:
            raise RepairError(f"{root}: {stop}")
        if outp is not None:
            _write_copy(view, outp, plan, root)
    return RepairResult(root, outp, plan.cut, plan.changes, plan.not_repaired, plan.r)


def _plan(view: Path, layout: Layout) -> _Plan:
    """Every change of the copy of the store laid out at ``view``."""
    report = verify(view, check_crc=True, tables=True)
    plan = _Plan(report, layout)
    for file, before, after in layout.changes:
        plan.note(file, None, before, after)
    plan.not_repaired.extend(layout.lost)
    plan.commitlog()
    plan.queues()
    with Store.open(view) as st:
        plan.index(st)
    plan.timer()
    plan.configs()
    plan.checkpoint()
    if report.abort:
        plan.skip.add("abort")
        plan.note("abort", None, "present (crashed)", "left out (the copy is a clean store)")
    for f in report.findings:
        if f.severity == Severity.ERROR and f.kind == "layout":
            plan.not_repaired.append(str(f))
    return plan


def _write_copy(view: Path, outp: Path, plan: _Plan, root: Path) -> None:
    """Copy ``view`` (the store as laid out) to ``outp`` with the plan's changes: staged beside
    it, fsynced, renamed into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{outp.name}.repair-", dir=outp.parent))
    try:
        for dirpath, _dirs, files in os.walk(view):
            rel_dir = Path(dirpath).relative_to(view)
            (tmp / rel_dir).mkdir(parents=True, exist_ok=True)
            for name in files:
                rel = str(rel_dir / name) if str(rel_dir) != "." else name
                if rel in plan.skip:
                    continue
                _copy_sparse(Path(dirpath) / name, tmp / rel)
        for act in plan.actions:
            act(tmp)
        _fsync_tree(tmp)
        shutil.copymode(root, tmp)  # the copy's root as open as the store's, not 0700
        if outp.exists():
            outp.rmdir()  # checked empty above
        os.rename(tmp, outp)
        fd = os.open(outp.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):  # e.g. a full disk: one line, and nothing was left behind
            where = failed_path(e)
            raise environment(RepairError(
                f"{outp}: cannot write the repaired copy: {e.strerror or e}"
                + (f" ({where})" if where else "")
                + f"; nothing was written to {outp}, and {root} is untouched"
            )) from None
        raise
