"""The resend journal: append-only JSON lines, write-ahead, fsynced, group-committed.

Per message, in this order:

1. ``intent`` (resend id, DLQ record, destination, the target's write position before the put),
   durable before the put;
2. the put into the target (a live broker's SEND_OK; a store target is synced after a batch);
3. ``done`` (where the copy landed) or ``failed`` (why), durable before the outcome is reported.

Lines are group-committed: one fdatasync makes the intents of a batch durable together with the
done/failed lines of the batch before it (the last ones at the end of the run), so a run costs
about one fdatasync per batch and a kill leaves at most two batches to resolve.

A re-run skips ids that are ``done``. An id whose last line is ``intent`` or ``failed`` is
resolved by asking the target whether it holds a message carrying its ``MQTOOL_RESEND_ID``
(:meth:`mqtool.dlq.targets.ResendTarget.contains`): found means the put happened before the kill
(a ``done`` line with ``how: found`` is appended, nothing is sent), not found means it is sent
now. A torn last line (killed mid-write) is cut off when the journal is opened for writing. The
journal file is ``flock``-ed for the duration of a run.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqtool.dlq.outgoing import OutgoingMessage, ResendError, SendResult, resend_id
from mqtool.formats.commitlog import CommitLogMessage

__all__ = [
    "JOURNAL_DIR",
    "JOURNAL_NAME",
    "JournalEntry",
    "ResendJournal",
    "crash_point",
    "default_journal_path",
    "live_journal_path",
    "resent_checker",
    "state_dir",
]

JOURNAL_DIR = Path("config") / "mqtool-resend"
JOURNAL_NAME = "journal.jsonl"


def state_dir() -> Path:
    """mqtool's per-user state directory: ``$XDG_STATE_HOME/mqtool`` (XDG Base Directory),
    ``~/.local/state/mqtool`` when the variable is unset or not absolute."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "mqtool"


def _safe_name(text: str) -> str:
    """``text`` as one file name: characters outside ``[A-Za-z0-9._-]`` as ``%XX``."""
    return re.sub(r"[^A-Za-z0-9._-]", lambda m: "".join(f"%{b:02X}" for b in
                                                    m.group().encode("utf-8")), text)


def live_journal_path(namesrv: str, group: str) -> Path:
    """Default journal of resending ``group``'s dead letters into a live cluster:
    ``<state dir>/resend/<name servers>/<group>.jsonl``. The cluster is keyed by its name
    server addresses, sorted, so ``a;b`` and ``b;a`` share a journal."""
    addrs = sorted({a.strip() for a in namesrv.split(";") if a.strip()})
    return state_dir() / "resend" / _safe_name(";".join(addrs)) / f"{_safe_name(group)}.jsonl"


CRASH_ENV = "MQTOOL_CRASH_AT"
_crash_counts: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Fault injection for the kill -9 tests: when ``$MQTOOL_CRASH_AT`` is ``<name>:<n>``, the
    process SIGKILLs itself the n-th time it passes this point (no cleanup, no flush, as a
    real ``kill -9``). Unset (always, outside those tests), this does nothing."""
    want = os.environ.get(CRASH_ENV)
    if not want or not want.startswith(name + ":"):
        return
    n = _crash_counts.get(name, 0) + 1
    _crash_counts[name] = n
    if str(n) == want[len(name) + 1:]:
        os.kill(os.getpid(), signal.SIGKILL)


def default_journal_path(target_root: str | os.PathLike[str]) -> Path:
    """Where a target store keeps its resend journal."""
    return Path(target_root) / JOURNAL_DIR / JOURNAL_NAME




@dataclass(slots=True)
class JournalEntry:
    """The latest state of one resend id: ``intent``, ``done`` or ``failed``."""

    op: str
    record: dict[str, Any]
    position: int | None = None  # from the latest intent


class ResendJournal:
    """The append-only resend journal of one target (see the module docstring).

    :meth:`read` loads one read-only (a missing file is an empty journal); :meth:`open`
    creates, locks and repairs it for appending.
    """

    def __init__(self, path: Path, entries: dict[str, JournalEntry], fd: int | None) -> None:
        self.path = path
        self.entries = entries
        self._fd = fd

    @staticmethod
    def _parse(path: Path, data: bytes) -> tuple[dict[str, JournalEntry], int]:
        """Entries and the length of the whole-line prefix (a torn last line is dropped)."""
        entries: dict[str, JournalEntry] = {}
        end = data.rfind(b"\n") + 1
        for n, line in enumerate(data[:end].splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rid, op = rec["resendId"], rec["op"]
            except (ValueError, KeyError, TypeError) as e:
                raise ResendError(f"{path}: line {n} is not a journal record: {e}") from None
            cur = entries.get(rid)
            if op == "intent":
                entries[rid] = JournalEntry(op, rec, rec.get("position"))
            elif cur is None:
                entries[rid] = JournalEntry(op, rec)
            else:
                cur.op, cur.record = op, rec
        return entries, end

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ResendJournal:
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            data = b""
        entries, _ = cls._parse(p, data)
        return cls(p, entries, None)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ResendJournal:
        p = Path(path)
        new_dir = not p.parent.exists()
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise ResendError(
                    f"{p}: another resend into this target is running (journal locked)"
                ) from None
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            entries, end = cls._parse(p, data)
            if end < size:  # torn last line from a killed run: nothing was put after it
                os.ftruncate(fd, end)
                os.fsync(fd)
            if new_dir or size == 0:
                _fsync_dir(p.parent)
        except BaseException:
            os.close(fd)
            raise
        return cls(p, entries, fd)

    def get(self, rid: str) -> JournalEntry | None:
        return self.entries.get(rid)

    def done_ids(self) -> set[str]:
        return {k for k, e in self.entries.items() if e.op == "done"}

    def _apply(self, rec: dict[str, Any]) -> None:
        rid = rec["resendId"]
        cur = self.entries.get(rid)
        if rec["op"] == "intent":
            self.entries[rid] = JournalEntry("intent", rec, rec.get("position"))
        elif cur is None:
            self.entries[rid] = JournalEntry(rec["op"], rec)
        else:
            cur.op, cur.record = rec["op"], rec

    def append(self, recs: list[dict[str, Any]]) -> None:
        """Append records as whole lines in one write, then fdatasync: durable on return."""
        if not recs:
            return
        if self._fd is None:
            raise ResendError(f"{self.path}: journal opened read-only")
        data = b"".join(
            (json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            for r in recs
        )
        view = memoryview(data)
        if os.environ.get(CRASH_ENV, "").startswith("journal-torn:"):
            n = os.write(self._fd, view[: len(view) // 2])  # half of the lines, then the kill
            crash_point("journal-torn")
            view = view[n:]
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fdatasync(self._fd)
        for r in recs:
            self._apply(r)

    @staticmethod
    def intent_record(out: OutgoingMessage, position: int | None, source: str) -> dict[str, Any]:
        return {
            "op": "intent", "resendId": out.resend_id, "at": _now_ms(), "source": source,
            "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "dlqOffset": out.dlq_offset,
            "uniqKey": out.uniq_key, "originMsgId": out.origin_msg_id, "to": out.topic,
            "position": position,
        }

    @staticmethod
    def done_record(out: OutgoingMessage, res: SendResult | None, how: str) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "op": "done", "resendId": out.resend_id, "at": _now_ms(), "how": how,
            "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "to": out.topic,
        }
        if res is not None:
            rec.update(msgId=res.msg_id, queueId=res.queue_id, queueOffset=res.queue_offset,
                       commitLogOffset=res.physical_offset)
        return rec

    @staticmethod
    def failed_record(out: OutgoingMessage, reason: str) -> dict[str, Any]:
        return {"op": "failed", "resendId": out.resend_id, "at": _now_ms(),
                "dlqTopic": out.dlq_topic, "dlqMsgId": out.dlq_msg_id, "reason": reason}

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def resent_checker(
    journals: Iterable[str | os.PathLike[str]],
) -> Callable[[CommitLogMessage], bool]:
    """For ``dlq list``: whether a DLQ record is ``done`` in any of these journals."""
    done: set[str] = set()
    for p in journals:
        done |= ResendJournal.read(p).done_ids()
    return lambda m: bool(done) and resend_id(m) in done

