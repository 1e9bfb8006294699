"""Crash harness shared by the crash test and the soak script (bench/write/crash_soak.py).

A forked child opens the store, then puts, sends back and ticks at random, writing one line to
a pipe after every call that returned ("P <key>" for a put): those are the acknowledged
operations. The parent kills it with SIGKILL at a random moment, reopens the store (recovery),
and checks that every acknowledged put is present exactly once, no delayed message was delivered
twice, and consume queues and index files agree with the commitlog.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from mqtool.refstore.engine import ManualClock, Message, RefStore, StoreConfig
from mqtool.store import Store

CRASH_CONFIG = StoreConfig(
    commitlog_file_size=16 * 1024,
    cq_entries_per_file=16,
    index_hash_slots=16,
    index_max_entries=64,
    message_delay_level="1s 2s 3s",
    store_host="10.0.0.1:10911",
)
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def child(root: Path, seed: int, wfd: int, max_ops: int) -> None:
    """The writer; never returns (``os._exit``)."""
    code = 0
    try:
        rnd = random.Random(seed)
        clock = ManualClock(time.time_ns() // 1_000_000)
        s = RefStore.open(root, CRASH_CONFIG, clock=clock, seed=seed)
        clock.set(max(clock.now, s.last_store_timestamp + 1))
        s.create_group("cg", retry_max_times=2)
        os.write(wfd, b"R\n")
        mine: list[int] = []
        for i in range(max_ops):
            clock.advance(rnd.randint(1, 120))
            op = rnd.random()
            if op < 0.08:
                keys = [f"a{seed}-{i}-{j}" for j in range(3)]
                rs = s.put_batch([
                    Message.create("T", rnd.randbytes(rnd.choice([0, 50, 900])), tags="b",
                                   keys=[k], properties={"batch": f"{seed}-{i}"})
                    for k in keys
                ])
                mine.extend(r.physical_offset for r in rs)
                os.write(wfd, "".join(f"P {k}\n" for k in keys).encode())
            elif op < 0.6 or not mine:
                key = f"a{seed}-{i}"
                level = rnd.choice([0, 0, 0, 1, 2, 3])
                body = rnd.randbytes(rnd.choice([0, 10, 300, 2000]))
                r = s.put(Message.create("T", body, tags=f"t{i % 3}", keys=[key, f"b{i}"],
                                         delay_level=level))
                mine.append(r.physical_offset)
                os.write(wfd, f"P {key}\n".encode())
            elif op < 0.8:
                off = mine.pop(rnd.randrange(len(mine)))  # each message is failed once
                if s.read_message(off).topic == SCHEDULE:
                    continue
                s.send_back("cg", off, delay_level=rnd.choice([0, 0, 0, -1]))
                os.write(wfd, b"S\n")
            elif op < 0.97:
                n = len(s.tick())
                os.write(wfd, f"T {n}\n".encode())
            else:
                s.flush()
        s.close()
        os.write(wfd, b"C\n")
    except BaseException:  # the child must never fall back into the test runner
        code = 1
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def run_once(root: Path, seed: int, *, kill_after_ms: float, max_ops: int = 400) -> list[str]:
    """Fork a writer, SIGKILL it ``kill_after_ms`` after it is ready (negative: after the fork,
    possibly during open/recovery); return the lines it acknowledged."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(rfd)
        child(root, seed, wfd, max_ops)
    os.close(wfd)
    buf = b""
    deadline = None
    if kill_after_ms < 0:
        deadline = time.monotonic() + (-kill_after_ms) / 1000
    os.set_blocking(rfd, False)
    killed = False
    while True:
        try:
            chunk = os.read(rfd, 65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            break
        if chunk:
            buf += chunk
            if deadline is None and b"R\n" in buf:
                deadline = time.monotonic() + kill_after_ms / 1000
        if deadline is not None and not killed and time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.0005)
    _, status = os.waitpid(pid, 0)
    os.close(rfd)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
        raise AssertionError(f"writer failed (seed {seed})")
    text = buf.decode()
    lines = text.split("\n")[:-1]  # a torn last line (no newline) was not acknowledged
    return lines


def verify(root: Path, acked_puts: set[str]) -> dict[str, int]:
    """Reopen (recover) the store and check it; returns counts. Raises AssertionError."""
    with RefStore.open(root, CRASH_CONFIG) as s:
        delay_offsets = dict(s.delay_offsets)
    with Store.open(root) as st:
        msgs = list(st.messages())
        assert not st.findings, st.findings
        originals: Counter[str] = Counter()
        delivered: Counter[tuple[str, int, str]] = Counter()
        by_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        for m in msgs:
            p = m.properties
            keys = m.key_list
            is_delivered = "REAL_TOPIC" in p and m.topic == p["REAL_TOPIC"]
            if m.reconsume_times == 0 and "RETRY_TOPIC" not in p and not is_delivered:
                originals[keys[0]] += 1
            if is_delivered:
                delivered[(m.uniq_key or "", m.reconsume_times, m.topic)] += 1
            by_queue.setdefault((m.topic, m.queue_id), []).append(
                (m.queue_offset, m.physical_offset, m.total_size)
            )
            for k in [m.uniq_key or "", *keys]:
                assert m.physical_offset in st.query_index(m.topic, k), (m.physical_offset, k)
        batches: Counter[str] = Counter(
            m.properties["batch"] for m in msgs
            if "batch" in m.properties and m.reconsume_times == 0
            and "RETRY_TOPIC" not in m.properties
        )
        torn = [b for b, n in batches.items() if n != 3]
        assert not torn, f"batches stored in part: {torn[:5]}"
        missing = [k for k in acked_puts if originals[k] != 1]
        assert not missing, f"acknowledged puts not present exactly once: {missing[:5]}"
        dups = [k for k, n in originals.items() if n > 1]
        assert not dups, f"duplicated puts: {dups[:5]}"
        twice = [k for k, n in delivered.items() if n > 1]
        assert not twice, f"delivered twice: {twice[:5]}"
        for (topic, qid), recs in by_queue.items():
            recs.sort()
            entries = [
                (e.queue_offset, e.entry.commit_log_offset, e.entry.size)
                for e in st.queue_entries(topic, qid)
            ]
            assert entries == recs, f"consume queue {topic}/{qid} disagrees with the commitlog"
        # schedule progress: every entry below the delay offset was delivered, none above
        for qid in range(3):
            entries = list(st.queue_entries(SCHEDULE, qid))
            done = delay_offsets.get(qid + 1, 0)
            for e in entries:
                sm = st.message_at(e.entry.commit_log_offset)
                real = sm.properties["REAL_TOPIC"]
                n = delivered[(sm.uniq_key or "", sm.reconsume_times, real)]
                assert n == (1 if e.queue_offset < done else 0), (qid, e.queue_offset, done, n)
    return {"messages": len(msgs), "acked": len(acked_puts), "delivered": sum(delivered.values())}
