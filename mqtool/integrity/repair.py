"""``mqtool repair``: a repaired copy of a store, as RocketMQ's own recovery would leave it.

The source store is only read. The copy is built in a temporary directory beside ``--out``,
every file fsynced, then renamed into place, so ``--out`` is either absent or complete. What
changes (each change is listed with file, offset, before -> after):

* commitlog: the valid data ends where RocketMQ's recovery stops (``processOffset``, see
  :mod:`mqtool.integrity.recovery`); the bytes after it in that file are zeroed and later files
  are left out (``truncateDirtyFiles`` deletes them);
* consume queues: units from the first impossible unit on, and the tail of units pointing at or
  past the valid end, are dropped (``ConsumeQueue#recover`` / ``truncateDirtyLogicFiles``);
  a unit in the middle that points at the wrong record is rewritten from the record that holds
  its queue offset, and units of readable records missing at a queue's tail are re-dispatched
  (what ``recoverAbnormally`` does);
* index files with damaged entries or entries past the valid end are rebuilt from the commitlog
  records they cover (``IndexService#buildIndex``; same name and geometry);
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
keeps it too); it is listed as not repaired.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mqtool.formats.checkpoint import build_checkpoint
from mqtool.formats.config import build_consumer_offset, build_delay_offset
from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.consumequeue import CQ_UNIT_STRUCT as _UNIT
from mqtool.formats.errors import MqtoolError, Severity, environment, failed_path, usage
from mqtool.formats.indexfile import index_key_hash
from mqtool.formats.rules import SCHEDULE_TOPIC, TIMER_TOPIC, schedule_unit_delay
from mqtool.integrity import rules
from mqtool.integrity.checks import QueueScan, Report, verify
from mqtool.integrity.recovery import cut_position, queue_cut
from mqtool.integrity.timerrepair import plan_timer_repair
from mqtool.store import Store
from mqtool.storequeues import special_kinds


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
    out: Path | None
    cut_at: int
    changes: list[Change]
    not_repaired: list[str]
    report: Report

    def to_json(self) -> dict[str, Any]:
        return {"out": None if self.out is None else str(self.out), "cutAt": self.cut_at,
                "changes": [c.to_json() for c in self.changes],
                "notRepaired": self.not_repaired}


def _refuse_special(src: Path) -> None:
    """Repair rewrites only what it fully understands: a store with 5.x options it does not
    (RocksDB queues or metadata, DLedger, batch or LMQ queues, CQ ext) is refused, untouched."""
    with Store.open(src) as st:
        root = st.root
    kinds = special_kinds(root)
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


def _zero(path: Path, start: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        left = end - start
        chunk = bytes(min(left, 1 << 20))
        while left > 0:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n


def _patch(path: Path, offset: int | None, data: bytes) -> None:
    """Write ``data`` at ``offset`` of ``path`` (None: ``data`` is the whole file)."""
    if offset is None:
        path.write_bytes(data)
        return
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


class _Plan:
    """Changes computed from the verify report, applied to a copy (or only listed)."""

    def __init__(self, r: Report) -> None:
        self.r = r
        self.start, self.cut = cut_position(r, repair=True)
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
                trivial = (s.end_kind == "zeros" and s.unreadable_bytes == 0
                           and cut >= s.data_end) or (
                    s.end_kind == "blank" and s.first_break is None
                    and s.first_kept_damage is None)
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
            bad = min((x for x in (s.first_break, s.first_kept_damage) if x is not None),
                      default=None)
            if bad is not None and bad < s.file.start + s.file.size and (
                    s.end_kind != "zeros" or s.unreadable_bytes):
                self.not_repaired.append(
                    f"{s.file.rel} @ {bad - s.file.start:#x}: unreadable data before "
                    "the file RocketMQ's recovery starts from; the broker keeps it, so does "
                    "the copy")

    # -- consume queues ----------------------------------------------------------------
    def queues(self) -> None:
        m = self.r.messages
        for q in self.r.queues:
            self._queue(q, m)

    def _queue(self, q: QueueScan, m: Any) -> None:
        if not q.files:
            return
        keep = queue_cut(q.phys, q.sizes, self.cut)
        topic_idx = m.topics.index(q.topic) if q.topic in m.topics else -1
        sel = np.flatnonzero((m.topic == topic_idx) & (m.queue_id == q.queue_id)
                             & (m.phy < self.cut)
                             & rules.expected_in_cq(m.sys_flag)) if topic_idx >= 0 else (
            np.zeros(0, np.int64))
        by_qoff = {int(m.queue_offset[i]): int(i) for i in sel.tolist()}
        # schedule queues: tagsCode = deliver time = store time + the level's delay (evidence)
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
                if row is None and kept[0] < self.recovery_start:
                    # it points at damage the broker's recovery never reads: RocketMQ keeps
                    # the unit and serves the units after it, so does the copy
                    self.not_repaired.append(
                        f"consumequeue/{q.topic}/{q.queue_id} offset {lo}: points at unreadable "
                        f"data (phy {kept[0]}) before the file RocketMQ's recovery starts from; "
                        "kept")
                    units.append(kept)
                    continue
                if row is None:
                    break  # nothing to rebuild it from: the queue ends here
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
        if q.topic == TIMER_TOPIC:
            self.queue_units[(q.topic, q.queue_id)] = (q.min_offset, units)
        if units == old:
            return
        self._rewrite_queue(q, units, old)

    def _unit_for(self, row: int, q: QueueScan, m: Any, delta: int | None,
                  old_tags: int | None) -> tuple[int, int, int] | None:
        phy, size = int(m.phy[row]), int(m.size[row])
        if rules.tags_code_is_tag_hash(q.topic):
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
            past = np.flatnonzero(ix.phys >= self.cut)
            bad = sorted(set(ix.bad_entries) | {int(i) + 1 for i in past.tolist()})
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
                for row in rows.tolist():
                    msg = src.try_message_at(int(m.phy[row]))
                    if msg is None or (msg.sys_flag & rules.TRANSACTION_TYPE_MASK) == (
                            rules.NOT_IN_CONSUME_QUEUE[1]):
                        continue
                    for k in rules.index_keys(msg.topic, msg.properties):
                        hashes.append(index_key_hash(k))
                        offs.append(msg.physical_offset)
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
            if name == "consumerOffset.json" and value is not None:
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
    only list the changes."""
    _refuse_special(Path(src))
    report = verify(src, check_crc=True, tables=True)
    root = report.root
    if out is not None and not dry_run:
        _check_out(Path(out), root)
    plan = _Plan(report)
    plan.commitlog()
    plan.queues()
    with Store.open(root) as st:
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
    result = RepairResult(None, plan.cut, plan.changes, plan.not_repaired, report)
    if dry_run or out is None:
        return result
    outp = Path(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outp.name}.repair-", dir=outp.parent))
    try:
        for dirpath, _dirs, files in os.walk(root):
            rel_dir = Path(dirpath).relative_to(root)
            (tmp / rel_dir).mkdir(parents=True, exist_ok=True)
            for name in files:
                rel = str(rel_dir / name) if str(rel_dir) != "." else name
                if rel in plan.skip:
                    continue
                shutil.copy2(Path(dirpath) / name, tmp / rel)
        for act in plan.actions:
            act(tmp)
        _fsync_tree(tmp)
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
    result.out = outp
    return result
