"""asyncio transport over real sockets: opaque matching, hostile peers, server keeps serving."""

from __future__ import annotations

import asyncio
import socket
import struct

from mqtool.remoting import frame
from mqtool.remoting.codes import ResponseCode
from mqtool.remoting.connection import Connection
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, RemotingServer, UnsupportedCode


async def _handler(cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
    if cmd.code == 1:  # echo, answered after a delay given in ms (out-of-order responses)
        await asyncio.sleep(int(cmd.ext_fields.get("ms", "0")) / 1000)
        return cmd.response(ext={"echo": cmd.ext_fields.get("v", "")}, body=cmd.body)
    raise UnsupportedCode(str(cmd.code))


async def _start(logs: list[str], **kw: float) -> tuple[RemotingServer, int]:
    srv = RemotingServer(  # type: ignore[arg-type]
        _handler, name="test", log=logs.append, held_codes=frozenset({1}), **kw
    )
    port = await srv.start("127.0.0.1", 0)
    return srv, port


def test_opaque_matching_and_unknown_code() -> None:
    async def main() -> None:
        logs: list[str] = []
        srv, port = await _start(logs)
        conn = await Connection.open("127.0.0.1", port)
        slow = asyncio.create_task(
            conn.invoke(RemotingCommand.request(1, {"v": "slow", "ms": 300}))
        )
        fast = await conn.invoke(RemotingCommand.request(1, {"v": "fast"}, b"xyz"))
        assert fast.ext_fields["echo"] == "fast" and fast.body == b"xyz" and not slow.done()
        assert (await slow).ext_fields["echo"] == "slow"
        unk = await conn.invoke(RemotingCommand.request(9999))
        assert unk.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and unk.is_response
        assert unk.remark == " request type 9999 not supported"  # NettyRemotingAbstract's
        await conn.invoke(RemotingCommand.request(9999))
        await conn.invoke(RemotingCommand.request(9998))
        said = [ln for ln in logs if "is not served" in ln]  # once per code on stderr
        assert said == [
            "test: request code 9999 is not served (answered REQUEST_CODE_NOT_SUPPORTED; "
            "said once per code)",
            "test: request code 9998 is not served (answered REQUEST_CODE_NOT_SUPPORTED; "
            "said once per code)",
        ]
        await conn.close()
        await srv.close()

    asyncio.run(main())


async def _raw_exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    got = await asyncio.wait_for(reader.read(), 5)  # server closes: read() returns at EOF
    writer.close()
    return got


def test_garbage_closes_only_that_connection() -> None:
    async def main() -> None:
        logs: list[str] = []
        srv, port = await _start(logs)
        good = await Connection.open("127.0.0.1", port)
        hdr = b'{"code":1'
        cases = [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # garbage: length 0x47455420 > 16 MiB
            struct.pack(">i", 2**31 - 1) + b"\x00" * 16,  # 2 GiB
            struct.pack(">i", -1) + b"\x00" * 16,  # negative
            struct.pack(">iI", 8, 999) + b"{}{}",  # header length past the frame
            struct.pack(">iI", 4 + len(hdr), len(hdr)) + hdr,  # invalid JSON
        ]
        for data in cases:
            assert await _raw_exchange(port, data) == b""
            r = await good.invoke(RemotingCommand.request(1, {"v": "still"}))
            assert r.ext_fields["echo"] == "still"
        assert srv.bad_frames == len(cases)
        assert all("bad frame" in line and "Traceback" not in line for line in logs)
        await good.close()
        await srv.close()

    asyncio.run(main())


def test_vanish_mid_frame_and_slow_client() -> None:
    async def main() -> None:
        logs: list[str] = []
        srv, port = await _start(logs, frame_timeout=0.5)
        full = frame.encode(RemotingCommand.request(1, {"v": "x"}))
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(full[:10])  # half a frame, then gone
        await w.drain()
        w.close()
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
        w2.write(full[:10])  # half a frame, then silence: dropped after frame_timeout
        await w2.drain()
        assert await asyncio.wait_for(r2.read(), 5) == b""
        w2.close()
        conn = await Connection.open("127.0.0.1", port)
        assert (await conn.invoke(RemotingCommand.request(1, {"v": "ok"}))).ext_fields[
            "echo"
        ] == "ok"
        await conn.close()
        assert any("mid-frame" in line for line in logs)
        assert any("not complete after" in line for line in logs)
        await srv.close()

    asyncio.run(main())


def test_held_requests_are_bounded_per_connection() -> None:
    async def main() -> None:
        srv = RemotingServer(
            _handler,
            name="test",
            log=lambda s: None,  # type: ignore[arg-type]
            held_codes=frozenset({1}),
            max_held=2,
        )
        port = await srv.start("127.0.0.1", 0)
        conn = await Connection.open("127.0.0.1", port)
        held = [
            asyncio.create_task(conn.invoke(RemotingCommand.request(1, {"ms": 500})))
            for _ in range(2)
        ]
        await asyncio.sleep(0.1)
        busy = await conn.invoke(RemotingCommand.request(1, {"v": "third"}))
        assert busy.code == ResponseCode.SYSTEM_BUSY
        assert [r.code for r in await asyncio.gather(*held)] == [ResponseCode.SUCCESS] * 2
        await conn.close()
        await srv.close()

    asyncio.run(main())


async def _handler2(cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
    """Code 1 as above (held); code 2: not held, answered after ``ms`` (suspends inline)."""
    if cmd.code == 2:
        ms = int(cmd.ext_fields.get("ms", "0"))
        if ms:
            await asyncio.sleep(ms / 1000)
        return cmd.response(ext={"echo": cmd.ext_fields.get("v", "")}, body=cmd.body)
    return await _handler(cmd, peer)


async def _read_responses(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    dec = frame.FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < n:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, f"connection closed after {len(out)} of {n} responses"
        out += dec.feed(data)
    return out


def test_pipelined_requests_answered_in_order() -> None:
    """Frames sent in one write, some split across writes, one whose handler suspends: every
    non-held request is answered, in the order asked (a suspended one holds back the rest)."""

    async def main() -> None:
        srv = RemotingServer(_handler2, name="test", log=lambda s: None,
                             held_codes=frozenset({1}))
        port = await srv.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        reqs = [RemotingCommand.request(2, {"v": str(i), "ms": 200 if i == 3 else 0},
                                        body=b"b" * i, opaque=i) for i in range(8)]
        data = b"".join(frame.encode(r) for r in reqs)
        writer.write(data[:50])  # a frame split across writes
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(data[50:])
        await writer.drain()
        got = await _read_responses(reader, 8)
        assert [r.opaque for r in got] == list(range(8))
        assert [r.ext_fields["echo"] for r in got] == [str(i) for i in range(8)]
        assert all(r.is_response and r.body == b"b" * r.opaque for r in got)
        writer.close()
        await srv.close()

    asyncio.run(main())


def test_half_closed_client_gets_its_answers() -> None:
    """A client that sends and then shuts down its sending side still gets every answer,
    held ones included, before the server closes."""

    async def main() -> None:
        srv = RemotingServer(_handler2, name="test", log=lambda s: None,
                             held_codes=frozenset({1}))
        port = await srv.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame.encode(RemotingCommand.request(1, {"v": "held", "ms": 300}, opaque=1))
                     + frame.encode(RemotingCommand.request(2, {"v": "now"}, opaque=2)))
        await writer.drain()
        writer.write_eof()
        got = await _read_responses(reader, 2)
        assert {r.opaque: r.ext_fields["echo"] for r in got} == {1: "held", 2: "now"}
        assert await asyncio.wait_for(reader.read(), 5) == b""  # then closed
        writer.close()
        await srv.close()

    asyncio.run(main())


def test_client_that_never_reads_is_not_read_either() -> None:
    """Answers a client does not read stay bounded: once the socket's write buffer is full the
    server stops reading that connection (the client's sends block); others keep being served."""

    async def main() -> None:
        srv = RemotingServer(_handler2, name="test", log=lambda s: None,
                             held_codes=frozenset({1}))
        port = await srv.start("127.0.0.1", 0)
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        req = frame.encode(RemotingCommand.request(2, {"v": "x"}, body=b"z" * 65536))
        sent, blocked = 0, False
        limit = 512 * 1024 * 1024  # without flow control all of it would be read and answered
        loop = asyncio.get_running_loop()
        while sent < limit:
            try:
                sent += sock.send(req)
            except BlockingIOError:
                await asyncio.sleep(0.2)  # let the server read what it will
                try:
                    sent += sock.send(req)
                except BlockingIOError:
                    blocked = True
                    break
            await asyncio.sleep(0)
        assert blocked, f"the server kept reading: {sent} bytes accepted"
        (peer,) = srv.peers
        assert peer.transport.get_write_buffer_size() < 16 * 1024 * 1024
        good = await Connection.open("127.0.0.1", port)
        r = await good.invoke(RemotingCommand.request(2, {"v": "other"}))
        assert r.ext_fields["echo"] == "other"
        await good.close()
        sock.close()
        await asyncio.sleep(0.1)
        assert loop.is_running()
        await srv.close()

    asyncio.run(main())


def test_idle_connection_dropped_active_one_kept() -> None:
    """A connection that sends nothing for idle_timeout is closed with one log line; one that
    keeps asking, each time within the timeout, stays open across several timeouts."""

    async def main() -> None:
        logs: list[str] = []
        srv = RemotingServer(_handler2, name="test", log=logs.append,
                             held_codes=frozenset({1}), idle_timeout=1.5)
        port = await srv.start("127.0.0.1", 0)
        r_idle, w_idle = await asyncio.open_connection("127.0.0.1", port)
        busy = await Connection.open("127.0.0.1", port)
        for i in range(24):  # 24 x 0.1 s: well past the idle timeout in total
            resp = await busy.invoke(RemotingCommand.request(2, {"v": str(i)}))
            assert resp.ext_fields["echo"] == str(i)
            await asyncio.sleep(0.1)
        assert await asyncio.wait_for(r_idle.read(), 5) == b""  # the silent one was closed
        assert (await busy.invoke(RemotingCommand.request(2, {"v": "still"}))).ext_fields[
            "echo"] == "still"
        assert sum("idle for" in line for line in logs) == 1
        w_idle.close()
        await busy.close()
        await srv.close()

    asyncio.run(main())


def test_partial_frames_capped_across_connections() -> None:
    """Incomplete frames of all connections together stay under ``max_buffered``: the one that
    would pass it is closed; what a closed connection held is given back."""

    async def main() -> None:
        logs: list[str] = []
        srv, port = await _start(logs, max_buffered=3 << 20)
        writers = []
        for _ in range(5):
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(struct.pack(">iI", 2 << 20, 10) + b"\x00" * (1 << 20))  # 1 MiB of 2 MiB
            await w.drain()
            writers.append(w)
        for _ in range(200):
            if srv.buffered >= 3 << 20 or len(logs) >= 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert srv.buffered == 2 * ((1 << 20) + 8)  # two held; a third would pass the cap
        assert len([line for line in logs if "would pass the 3 MiB cap" in line]) == 3, logs
        good = await Connection.open("127.0.0.1", port)  # small requests still served
        assert (await good.invoke(RemotingCommand.request(1, {"v": "ok"}))).ext_fields["echo"]
        for w in writers:
            w.close()
        for _ in range(200):
            if srv.buffered == 0:
                break
            await asyncio.sleep(0.01)
        assert srv.buffered == 0
        await good.close()
        await srv.close()
        assert not srv.peers

    asyncio.run(main())


def test_work_after_an_answer_runs_before_the_next_request() -> None:
    """``Peer.after_reply``: the work a handler leaves runs before the connection's next
    request, even with requests pipelined in one write, whose answers then go out together in
    one write (a lone request's answer goes out before its work); a failing piece of work is
    said on stderr and the connection goes on."""
    events: list[str] = []
    logs: list[str] = []
    writes: list[int] = []

    async def handler(cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
        v = cmd.ext_fields["v"]
        events.append(f"request {v}")
        transport = peer.transport
        if not writes:  # count the connection's writes (the transport's own method, wrapped)
            write = transport.write

            def counted(data: bytes | bytearray | memoryview) -> None:
                writes.append(len(data))
                write(data)

            transport.write = counted  # type: ignore[method-assign]
            writes.append(0)
        if cmd.code == 3:  # leaves work: one that records, one that fails
            def work() -> None:
                events.append(f"work {v} after {len(writes) - 1} writes")

            def broken() -> None:
                raise OSError(28, "No space left on device")

            peer.after_reply += [work, broken]
        return cmd.response(ext={"echo": v})

    async def main() -> None:
        srv = RemotingServer(handler, name="test", log=logs.append)
        port = await srv.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        reqs = [RemotingCommand.request(3 if i % 2 == 0 else 4, {"v": str(i)}, opaque=i)
                for i in range(5)]
        writer.write(b"".join(frame.encode(r) for r in reqs))  # one write: one read
        await writer.drain()
        got = await _read_responses(reader, 5)
        assert [r.ext_fields["echo"] for r in got] == [str(i) for i in range(5)]
        writer.write(frame.encode(RemotingCommand.request(3, {"v": "5"}, opaque=5)))  # alone
        await writer.drain()
        assert (await _read_responses(reader, 1))[0].ext_fields["echo"] == "5"
        writer.close()
        await srv.close()

    asyncio.run(main())
    assert events == ["request 0", "work 0 after 0 writes", "request 1", "request 2",
                      "work 2 after 0 writes", "request 3", "request 4", "work 4 after 1 writes",
                      "request 5", "work 5 after 2 writes"]
    assert len(writes) == 3, writes  # the counter's mark, the five answers, the lone one
    assert len(logs) == 4 and all("the work after an answer failed: OSError" in ln
                                  for ln in logs), logs
