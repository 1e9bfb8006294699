"""asyncio (stdlib) transport for remoting frames: a server and a client connection.

Server: requests whose code may be held (``held_codes``, e.g. PULL_MESSAGE with long polling)
run in their own task so they never block the other requests of the same connection; the rest
are answered in order as they arrive. A response carries the request's opaque; oneway requests get
none. A bad frame (:class:`FrameError`) closes that one connection with a one-line log; other
connections keep being served. Requests are bounded: ``max_frame`` before any allocation, an idle
timeout between frames and a timeout for the rest of a frame once its length is read (slow or
vanished clients release their connection).

Client: :class:`Connection` matches responses to requests by opaque.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mqtool.formats.errors import MqtoolError
from mqtool.remoting.codes import FLAG_ONEWAY, ResponseCode
from mqtool.remoting.frame import (
    DEFAULT_MAX_FRAME,
    LENGTH_FIELD_SIZE,
    FrameError,
    RemotingCommand,
    RemotingError,
    check_length,
    decode_payload,
    encode,
    length_of,
)

#: RocketMQ closes a channel idle for 120 s (``serverChannelMaxIdleTimeSeconds``).
DEFAULT_IDLE_TIMEOUT = 120.0
#: Held requests (long polls) one connection may have at once; more are answered SYSTEM_BUSY.
DEFAULT_MAX_HELD = 1024
#: Time allowed for the rest of a frame once its length arrived.
DEFAULT_FRAME_TIMEOUT = 30.0


async def read_command(
    reader: asyncio.StreamReader,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    idle_timeout: float | None = None,
    frame_timeout: float | None = None,
) -> RemotingCommand | None:
    """The next command, or None on a clean end of stream between frames.

    FrameError: bad length/header, end of stream or timeout inside a frame.
    """
    try:
        async with asyncio.timeout(idle_timeout):  # no extra task per frame, unlike wait_for
            prefix = await reader.readexactly(LENGTH_FIELD_SIZE)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError(
            f"connection closed inside a length field ({len(e.partial)} of 4 bytes)"
        ) from None
    except TimeoutError:
        raise FrameError(f"idle for {idle_timeout:.0f} s") from None
    length = length_of(prefix)
    check_length(length, max_frame=max_frame)
    try:
        async with asyncio.timeout(frame_timeout):
            payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise FrameError(
            f"connection closed mid-frame ({len(e.partial)} of {length} bytes)"
        ) from None
    except TimeoutError:
        raise FrameError(
            f"frame of {length} bytes not complete after {frame_timeout:.0f} s"
        ) from None
    return decode_payload(payload)


Handler = Callable[[RemotingCommand, "Peer"], Awaitable[RemotingCommand | None]]


class UnsupportedCode(RemotingError):
    """Raised by a handler for a code it does not serve (answered REQUEST_CODE_NOT_SUPPORTED)."""


@dataclass(eq=False)
class Peer:
    """One accepted connection as handlers see it."""

    address: str
    writer: asyncio.StreamWriter
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    closed: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, cmd: RemotingCommand) -> None:
        """Write one command (ignored once the connection is gone)."""
        if self.closed or self.writer.is_closing():
            return
        data = encode(cmd)
        async with self._lock:
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, OSError):
                self.closed = True


def _log(msg: str) -> None:
    print(f"mqtool serve: {msg}", file=sys.stderr, flush=True)


class RemotingServer:
    """A listening remoting endpoint dispatching requests to ``handler``."""

    def __init__(
        self,
        handler: Handler,
        *,
        name: str = "remoting",
        max_frame: int = DEFAULT_MAX_FRAME,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float = DEFAULT_FRAME_TIMEOUT,
        log: Callable[[str], None] = _log,
        on_disconnect: Callable[[Peer], None] | None = None,
        held_codes: frozenset[int] = frozenset(),
        max_held: int = DEFAULT_MAX_HELD,
    ) -> None:
        self.handler = handler
        self.name = name
        self.max_frame = max_frame
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.log = log
        self.on_disconnect = on_disconnect
        self.held_codes = held_codes
        self.max_held = max_held
        self.peers: set[Peer] = set()
        self._server: asyncio.Server | None = None
        self.bad_frames = 0

    async def start(self, host: str, port: int) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("peername")
        peer = Peer(f"{addr[0]}:{addr[1]}" if addr else "?", writer)
        self.peers.add(peer)
        try:
            while not peer.closed:
                try:
                    cmd = await read_command(
                        reader,
                        max_frame=self.max_frame,
                        idle_timeout=self.idle_timeout,
                        frame_timeout=self.frame_timeout,
                    )
                except FrameError as e:
                    self.bad_frames += 1
                    self.log(f"{self.name}: {peer.address}: bad frame: {e}; closing the connection")
                    break
                except (ConnectionError, OSError):
                    break
                if cmd is None:
                    break
                if cmd.is_response:
                    continue  # mqtool's server sends no requests; stray responses are dropped
                if cmd.code in self.held_codes and len(peer.tasks) >= self.max_held:
                    await peer.send(
                        cmd.response(
                            ResponseCode.SYSTEM_BUSY,
                            f"[PCBUSY] {self.max_held} held requests already on this connection",
                        )
                    )
                elif cmd.code in self.held_codes:  # may be held (long polling): its own task
                    task = asyncio.create_task(self._dispatch(cmd, peer))
                    peer.tasks.add(task)
                    task.add_done_callback(peer.tasks.discard)
                else:  # answered at once: in order, without a task per request
                    await self._dispatch(cmd, peer)
        finally:
            if peer.tasks:
                await asyncio.wait(set(peer.tasks), timeout=self.frame_timeout)
            peer.closed = True
            self.peers.discard(peer)
            if self.on_disconnect is not None:
                self.on_disconnect(peer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _dispatch(self, cmd: RemotingCommand, peer: Peer) -> None:
        try:
            resp = await self.handler(cmd, peer)
        except UnsupportedCode:
            resp = cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        except MqtoolError as e:  # bad header field, body or store request: answered
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a handler bug must not kill the server
            self.log(
                f"{self.name}: {peer.address}: code {cmd.code} failed: {type(e).__name__}: {e}"
            )
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        if resp is not None and not cmd.is_oneway:
            await peer.send(resp)

    def stop_accepting(self) -> None:
        """Close the listening socket; established connections go on."""
        if self._server is not None:
            self._server.close()

    async def in_flight(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for requests being handled."""
        tasks = {t for p in self.peers for t in p.tasks}
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def close(self) -> None:
        """Close every connection and the listener."""
        self.stop_accepting()
        for p in list(self.peers):
            p.closed = True
            for t in list(p.tasks):
                t.cancel()
            p.writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)


class Connection:
    """A client connection: ``invoke`` sends a request and awaits the response with its opaque.

    Requests the server pushes (e.g. NOTIFY_CONSUMER_IDS_CHANGED) go to ``on_request`` when set.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_request: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.max_frame = max_frame
        self.on_request = on_request
        self._opaque = itertools.count(1)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._error: BaseException | None = None
        self._task = asyncio.create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        timeout: float = 5.0,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> Connection:
        """Connect to ``host:port``."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as e:
            raise RemotingError(f"cannot connect to {host}:{port}: {e}") from None
        return cls(reader, writer, max_frame=max_frame)

    async def _read_loop(self) -> None:
        try:
            while True:
                cmd = await read_command(self._reader, max_frame=self.max_frame)
                if cmd is None:
                    raise RemotingError("connection closed by the server")
                if cmd.is_response:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                elif self.on_request is not None:
                    self.on_request(cmd)
        except (RemotingError, ConnectionError, OSError) as e:
            self._error = e if isinstance(e, RemotingError) else RemotingError(str(e))
        finally:
            err = self._error or RemotingError("connection closed")
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(err)
            self._pending.clear()

    def next_opaque(self) -> int:
        """A fresh opaque for a request."""
        return next(self._opaque) & 0x7FFFFFFF

    async def invoke(self, cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
        """Send a request and return its response (RemotingError on timeout or loss)."""
        if self._error is not None:
            raise self._error
        cmd.opaque = self.next_opaque()
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            self._writer.write(encode(cmd, max_frame=self.max_frame))
            await self._writer.drain()
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise RemotingError(f"no response to code {cmd.code} within {timeout:g} s") from None
        except (ConnectionError, OSError) as e:
            raise RemotingError(f"connection lost: {e}") from None
        finally:
            self._pending.pop(cmd.opaque, None)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request flagged oneway (no response)."""
        if self._error is not None:
            raise self._error
        cmd.opaque = self.next_opaque()
        cmd.flag |= FLAG_ONEWAY
        self._writer.write(encode(cmd, max_frame=self.max_frame))
        await self._writer.drain()

    async def close(self) -> None:
        """Close the connection."""
        self._task.cancel()
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
