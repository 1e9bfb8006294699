"""asyncio transport over real sockets: opaque matching, hostile peers, server keeps serving."""

from __future__ import annotations

import asyncio
import struct

from mqtool.remoting import frame
from mqtool.remoting.codes import ResponseCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.transport import Connection, Peer, RemotingServer, UnsupportedCode


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
