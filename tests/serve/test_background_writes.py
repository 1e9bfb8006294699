"""Work ``mqtool serve`` keeps out of its requests' way, in process through mqtool's own
remoting connection: a full buffer of index keys is written after the answer of the send that
filled it, and a flush round's disk writes run on a thread other than the event loop's."""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path

import pytest

from mqtool.formats.checkpoint import parse_checkpoint
from mqtool.refstore import index as index_mod
from mqtool.refstore import mapped
from mqtool.remoting import server as server_mod
from mqtool.remoting.codes import RequestCode, ResponseCode
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.serve import service as service_mod
from mqtool.serve.service import Service
from mqtool.store import Store
from tests.serve.inprocess import serve_in_process


def _send(n: int) -> RemotingCommand:
    keys = " ".join(f"k{n}-{i}" for i in range(3))
    ext = {"producerGroup": "PID", "topic": "T", "defaultTopic": "TBW102",
           "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 1,
           "flag": 0, "properties": f"KEYS\x01{keys}\x02UNIQ_KEY\x01U{n:031d}\x02"}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, b"body %d" % n)


def test_index_keys_are_written_after_the_answer(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "INDEX_BATCH", 8)  # 4 keys a message: due at the 2nd
    events: list[str] = []
    answer = server_mod.Peer.write

    def write(peer: server_mod.Peer, data: bytes) -> None:
        events.append("answer")
        answer(peer, data)

    monkeypatch.setattr(server_mod.Peer, "write", write)

    async def body(svc: Service, br: Connection) -> None:
        assert svc.store is not None
        index = svc.store.index
        keys = index.write_buffered

        def write_buffered() -> None:
            events.append("index")
            keys()

        monkeypatch.setattr(index, "write_buffered", write_buffered)
        for n in range(4):
            r = await br.invoke(_send(n))
            assert r.code == ResponseCode.SUCCESS, r.remark
        assert events == ["answer", "answer", "index", "answer", "answer", "index"]

    serve_in_process(tmp_path / "store", body)
    with Store.open(tmp_path / "store") as st:
        assert not st.findings
        assert all(len(st.query_index("T", f"k{n}-2")) == 1 for n in range(4))


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Flush rounds every 50 ms; the threads the data files were synced on, in order."""
    monkeypatch.setattr(service_mod, "FLUSH_INTERVAL", 0.05)
    names: list[str] = []
    real = mapped._datasync

    def datasync(fd: int) -> None:
        names.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(mapped, "_datasync", datasync)
    return names


async def _flushed(store: Path, br: Connection, synced: list[str]) -> int:
    """Send one message, then wait for a flush round whose checkpoint claims it: the claimed
    store timestamp."""
    r = await br.invoke(_send(0))
    assert r.code == ResponseCode.SUCCESS, r.remark
    for _ in range(200):
        await asyncio.sleep(0.05)
        cp = parse_checkpoint((store / "checkpoint").read_bytes())
        if synced and cp.physic_msg_timestamp:
            return cp.physic_msg_timestamp
    raise AssertionError(f"no flush round: {synced}")


def test_a_flush_round_syncs_on_another_thread(tmp_path: Path, synced: list[str]) -> None:
    stored: list[int] = []

    async def body(svc: Service, br: Connection) -> None:
        stored.append(await _flushed(tmp_path / "store", br, synced))

    serve_in_process(tmp_path / "store", body)
    loop_thread = threading.current_thread().name  # asyncio.run's loop ran on this thread
    assert synced and synced[0] != loop_thread, synced
    with Store.open(tmp_path / "store") as st:
        (m,) = st.messages()
        assert stored == [m.store_timestamp]


def test_a_flush_round_out_of_descriptors_flushes_on_the_loop(
        tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No descriptor to spare for the thread's duplicates (EMFILE): the round still flushes,
    the whole of it on the loop's thread, and says nothing (nothing failed)."""

    def no_dup(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(mapped.os, "dup", no_dup)
    said: list[str] = []

    async def body(svc: Service, br: Connection) -> None:
        svc.log = said.append
        await _flushed(tmp_path / "store", br, synced)

    serve_in_process(tmp_path / "store", body)
    assert synced and set(synced) == {threading.current_thread().name}, synced
    assert said == []


def test_a_sync_that_keeps_failing_is_said_once(
        tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fails every sync (EIO): one line for it, however many rounds start fine."""

    recording = mapped._datasync

    def broken(fd: int) -> None:
        synced.append(threading.current_thread().name)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(mapped, "_datasync", broken)
    said: list[str] = []

    async def body(svc: Service, br: Connection) -> None:
        svc.log = said.append
        r = await br.invoke(_send(0))
        assert r.code == ResponseCode.SUCCESS, r.remark
        while len(synced) < 5:  # five rounds' syncs at least, each failing
            await asyncio.sleep(0.05)
        monkeypatch.setattr(mapped, "_datasync", recording)  # the disk mended for the close

    serve_in_process(tmp_path / "store", body)
    assert [line for line in said if "Input/output error" in line] == [
        "flush failed: [Errno 5] Input/output error (tried again every round; said once)"], said
