"""Store access beyond the manifests: lock detection, time search, filters, damaged tails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.query import MessageFilter, select_messages
from mqtool.store import Store


def test_lock_held_by_another_process_is_reported(store_copy) -> None:  # type: ignore[no-untyped-def]
    root: Path = store_copy("4.9.7/journey")
    with Store.open(root) as st:
        assert st.lock_state().exists and not st.lock_state().locked
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl,os,sys,time\n"
         f"fd=os.open({str(root / 'lock')!r}, os.O_RDWR)\n"
         "fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 0)\n"
         "print('locked', flush=True)\ntime.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with Store.open(root) as st:
            state = st.lock_state()
            assert state.locked and state.holder_pid == holder.pid
            assert len(list(st.messages())) == 50  # reading a locked store still works
    finally:
        holder.kill()
        holder.wait()


def test_offset_by_time_binary_search_matches_linear() -> None:
    truth = [r for r in manifest_jsonl("4.9.7/plain", "commitlog.jsonl") if r["kind"] == "msg"]
    q0 = sorted((r for r in truth if (r["topic"], r["queueId"]) == ("TopicA", 0)),
                key=lambda r: r["queueOffset"])
    with Store.open(store_dir("4.9.7/plain")) as st:
        for probe in (q0[0], q0[len(q0) // 3], q0[-1]):
            ts = probe["storeTimestamp"]
            want = next(r["queueOffset"] for r in q0 if r["storeTimestamp"] >= ts)
            assert st.offset_by_time("TopicA", 0, ts) == want
        assert st.offset_by_time("TopicA", 0, q0[-1]["storeTimestamp"] + 1) == len(q0)


def test_message_filters_match_manifest() -> None:
    truth = [r for r in manifest_jsonl("4.9.7/plain", "commitlog.jsonl") if r["kind"] == "msg"]
    mid = truth[len(truth) // 2]["storeTimestamp"]
    end = truth[len(truth) * 3 // 4]["storeTimestamp"]
    want = [r["phyOffset"] for r in truth
            if r["topic"] == "TopicA" and mid <= r["storeTimestamp"] < end and r["tags"] == "TagA"]
    with Store.open(store_dir("4.9.7/plain")) as st:
        got = [m.physical_offset for m in select_messages(
            st, MessageFilter(topic="TopicA", since=mid, until=end, tag="TagA"))]
        assert got == want and want
        key = truth[0]["keys"].split()[1]
        by_key = [m.physical_offset for m in select_messages(st, MessageFilter(key=key))]
        assert by_key == [r["phyOffset"] for r in truth if key in (r["keys"] or "").split()]
        assert len(list(select_messages(st, MessageFilter(limit=7)))) == 7


def _tear_last_record(root: Path) -> None:
    """A torn write: the journey store's last record (at 18754, 368 bytes) keeps TOTALSIZE and
    magic, the rest of it is zeros (zeros inside the properties alone would be undetectable, as
    in RocketMQ)."""
    last = root / "commitlog" / "00000000000000016384"
    data = bytearray(last.read_bytes())
    cut = 18754 - 16384 + 60
    data[cut:] = b"\x00" * (len(data) - cut)
    last.write_bytes(bytes(data))


def test_torn_last_record_ends_with_finding_and_exit_1(store_copy) -> None:  # type: ignore[no-untyped-def]
    root: Path = store_copy("4.9.7/journey")
    _tear_last_record(root)
    with Store.open(root) as st:
        msgs = list(st.messages())
        assert len(msgs) == 49
        # one offset convention: the offset inside the file, the commitlog position as phy
        assert [(f.kind, f.file, f.offset, f.phy) for f in st.findings] == [
            ("torn-record", "commitlog/00000000000000016384", 18754 - 16384, 18754)]
    res = CliRunner().invoke(app, ["messages", str(root), "--jsonl"])
    assert res.exit_code == 1
    assert len(res.stdout.splitlines()) == 49
    assert "commitlog/00000000000000016384 @ 0x942 (phy 18754)" in res.output


def test_since_skips_whole_files_but_keeps_results() -> None:
    with Store.open(store_dir("4.9.7/plain")) as st:
        allm = list(st.messages())
        t = allm[1500].store_timestamp
        fast = [m.physical_offset for m in st.messages(since=t) if m.store_timestamp >= t]
        assert fast == [m.physical_offset for m in allm if m.store_timestamp >= t]
        assert next(iter(st.messages(since=t))).physical_offset > allm[0].physical_offset


def test_queue_entry_stops_early_without_leaking_the_mapping() -> None:
    with Store.open(store_dir("4.9.7/plain")) as st:
        for _ in range(3):
            qe = st.queue_entry("TopicA", 0, 150)
            assert qe is not None and qe.queue_offset == 150
        assert st.queue_entry("TopicA", 0, 10**9) is None


def test_store_time_reads_index_headers_only() -> None:
    """scan and trace call store_time first: it must not run the per-entry index check,
    whose memory grows with the index (250 MiB of a 2 GiB store's in the driver)."""
    from mqtool.overview import store_time

    with Store.open(store_dir("4.9.7/plain")) as st:
        now = store_time(st)
        assert not st._index_entries_checked
        ends = [r.header.end_timestamp for _, r in st.index_files()]
        assert st._index_entries_checked and ends and now >= max(ends) > 0


def test_small_stores_are_read_without_the_kernel_and_say_the_same(
    store_copy, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    """A small store's data end and queue bounds come from the walker and the unit rule (no
    numba to load); the compiled kernel's walk gives the same answers and findings, damage
    included: a torn last record, a unit pointing past the data, a unit naming no record."""
    import struct

    import mqtool.store.reader as reader_mod
    import mqtool.store.records_at as records_at_mod

    root: Path = store_copy("4.9.7/journey")
    _tear_last_record(root)
    cq = root / "consumequeue" / "JourneyTopic" / "0" / "00000000000000000000"
    with open(cq, "r+b") as f:
        f.seek(20)
        f.write(struct.pack(">qiq", 10**9, 300, 0) + struct.pack(">qiq", 7, 300, 0))

    def read() -> tuple[int, list[tuple[int, int]], list[str]]:
        with Store.open(root) as st:
            end = st.max_physical_offset()
            bounds = [(st.queue_info(t, q).min_offset, st.queue_info(t, q).max_offset)
                      for t, q in st.queue_ids()]
            return end, bounds, [str(f) for f in st.findings]

    small = read()
    assert small[0] == 18754 and len(small[2]) >= 3, small
    monkeypatch.setattr(reader_mod, "KERNEL_MIN_BYTES", -1)
    monkeypatch.setattr(records_at_mod, "KERNEL_MIN_UNITS", 0)
    assert read() == small
    assert "numba" in sys.modules  # the kernel did the second read
