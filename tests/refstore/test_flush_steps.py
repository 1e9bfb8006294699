"""A store flush in steps (begin, sync on any thread, end) and index keys written on request:
what ``mqtool serve`` does to keep disk writes and index writes out of its requests' way."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mqtool.formats.checkpoint import parse_checkpoint
from mqtool.refstore import index as index_mod
from mqtool.refstore import mapped
from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.store import Store

CFG = StoreConfig(commitlog_file_size=1 << 20, cq_entries_per_file=64, index_hash_slots=64,
                  index_max_entries=256, store_host="10.0.0.1:10911")


def _checkpoint(root: Path) -> tuple[int, int, int]:
    cp = parse_checkpoint((root / "checkpoint").read_bytes())
    return cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp


def _open_fds() -> dict[str, str]:
    """Open descriptors and what they are (the listing's own descriptor is gone by then)."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def test_flush_in_steps_claims_what_was_synced(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[tuple[int, str]] = []
    real = mapped._datasync

    def datasync(fd: int) -> None:
        synced.append((fd, threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(mapped, "_datasync", datasync)
    root = tmp_path / "store"
    clock = ManualClock(1_795_000_000_000)
    s = RefStore.open(root, CFG, clock=clock, seed=1)
    first = s.put(Message.create("T", b"synced", keys=["a"], queue_id=0))
    s.index.write_buffered()  # (flush_begin's first step: the index file exists then)
    files = [*s.commitlog.flush_files(), *s.queues.flush_files(), *s.index.flush_files()]
    assert s.commitlog.flush_files() and s.index.flush_files()
    before = _open_fds()
    pending = s.flush_begin(dup=True)
    dups = {fd: path for fd, path in _open_fds().items() if fd not in before}
    assert len(dups) == len(files)  # a duplicate descriptor per file
    clock.advance(1000)
    # puts go on meanwhile
    later = s.put(Message.create("T", b"after the begin", keys=["b"], queue_id=0))
    t = threading.Thread(target=pending.sync, name="syncer")
    t.start()
    t.join()
    after = _open_fds()
    assert not [fd for fd, path in dups.items() if after.get(fd) == path], (dups, after)
    assert [name for _, name in synced] == ["syncer"] * len(files)
    s.flush_end(pending)
    # the checkpoint vouches for what was synced, not for the put made since the begin
    assert _checkpoint(root) == (first.store_timestamp, first.store_timestamp,
                                 first.store_timestamp)
    synced.clear()
    s.flush()  # all three steps on this thread, the store's own descriptors
    assert len(synced) == len(files) and {name for _, name in synced} == {"MainThread"}
    assert _checkpoint(root)[0] == later.store_timestamp
    s.close()
    with Store.open(root) as st:
        assert [m.body for m in st.messages()] == [b"synced", b"after the begin"]
        assert not st.findings


def test_index_keys_written_when_the_owner_asks(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "INDEX_BATCH", 4)
    monkeypatch.setattr(index_mod, "INDEX_DUE_LIMIT", 12)
    s = RefStore.open(tmp_path / "store", CFG, clock=ManualClock(1_795_000_000_000), seed=1)

    def written() -> int:  # index entries in the current file (entry 0 is unused)
        return s.index.current.index_count - 1 if s.index.current is not None else 0

    asked: list[int] = []
    s.index.on_due = lambda: asked.append(written())

    s.put(Message.create("T", b"1", keys=["k1", "k2"]))  # 3 keys with the UNIQ_KEY
    assert asked == [] and written() == 0
    s.put(Message.create("T", b"2", keys=["k3"]))  # 5 keys: a batch is due, not written
    assert asked == [0] and written() == 0
    s.put(Message.create("T", b"3", keys=["k4"]))  # asked once until written
    assert asked == [0] and written() == 0
    s.index.write_buffered()
    assert written() == 7
    for i in range(6):  # due again, asked again; past the limit the put writes them itself
        s.put(Message.create("T", b"x", keys=[f"m{i}"]))
    assert asked == [0, 7]
    assert written() == 7 + 12
    s.close()
    with Store.open(tmp_path / "store") as st:
        assert not st.findings
        assert all(st.query_index("T", k) for k in ("k1", "k2", "k3", "k4", "m0", "m5"))
