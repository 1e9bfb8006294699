"""The remoting server (asyncio, stdlib): connections accepted, frames read, requests handed
to handlers, answers written.

``mqtool serve`` (:mod:`mqtool.serve.service`) runs its name server and broker on this server.

An :class:`asyncio.Protocol` per connection feeds the socket's bytes straight into a
:class:`FrameDecoder` (no stream reader, no task or timer per request). Requests whose code may be
held (``held_codes``, e.g. PULL_MESSAGE with long polling) run in their own task so they never
block the other requests of the same connection; the rest are started inline and answered in
order as they arrive, the answers to one read's requests in one write (a handler that has to
wait pauses reading until it is answered). A response carries the request's opaque; oneway
requests get none. The server may also ask a client over its connection (:meth:`Peer.invoke`):
the client's response is matched by its opaque as soon as it is read. A bad frame
(:class:`FrameError`) closes that one connection with a one-line log; other connections keep
being served. Requests are bounded: ``max_frame`` before any
allocation, an idle timeout between frames, a timeout for the rest of a frame once its first
bytes arrived (slow or vanished clients release their connection), and reading pauses while a
client does not read its answers (the socket's write buffer is over its high-water mark).
Memory is bounded across connections: the bytes of incomplete frames all connections hold
together stay under ``max_buffered``; the connection whose bytes would pass it is closed (one
line), and a closed connection's buffer is released at once. The server accepts connections
itself: out of file descriptors (EMFILE/ENFILE), it says so in one line per episode and tries
again with a growing back-off instead of spinning. Answers to failed requests never carry a
server path (``redact``, and an OSError is answered with its reason only).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import socket
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

from mqtool.formats.errors import MqtoolError
from mqtool.remoting.codes import FLAG_RESPONSE, ResponseCode
from mqtool.remoting.frame import (
    DEFAULT_MAX_FRAME,
    LENGTH_FIELD_SIZE,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    RemotingError,
    encode,
)

#: RocketMQ closes a channel idle for 120 s (``serverChannelMaxIdleTimeSeconds``).
DEFAULT_IDLE_TIMEOUT = 120.0
#: Held requests (long polls) one connection may have at once; more are answered SYSTEM_BUSY.
DEFAULT_MAX_HELD = 1024
#: Time allowed for the rest of a frame once its length arrived.
DEFAULT_FRAME_TIMEOUT = 30.0
#: Bytes of incomplete frames all connections of a server may hold together (32 frames of
#: ``maxMessageSize``, 4 MiB, arriving at once).
DEFAULT_MAX_BUFFERED = 128 * 1024 * 1024
#: ``listen`` backlog (Netty's ``SO_BACKLOG`` default on Linux is ``somaxconn``).
ACCEPT_BACKLOG = 1024
#: Connections accepted per readiness event of the listening socket.
ACCEPT_BATCH = 64
#: Back-off between accept attempts while out of file descriptors: first and longest wait (s).
ACCEPT_RETRY_FIRST = 0.05
ACCEPT_RETRY_MAX = 1.0
#: accept() errors that mean "out of a resource": wait and try again.
_OUT_OF_RESOURCE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: A handler's OSError of one errno is logged at most once per this many seconds.
OS_ERROR_LOG_INTERVAL = 60.0


Handler = Callable[[RemotingCommand, "Peer"], Awaitable[RemotingCommand | None]]


class UnsupportedCode(RemotingError):
    """Raised by a handler for a code it does not serve (answered REQUEST_CODE_NOT_SUPPORTED)."""


class NoResponse(RemotingError):
    """A request sent to a client got no response: none within the timeout, or the connection
    closed first (``RemotingTimeoutException`` of the broker)."""


#: Opaques of the requests the server sends to its clients (``RemotingCommand.requestId``).
_OPAQUES = itertools.count(1)


class Peer:
    """One accepted connection as handlers see it.

    Besides answering, the server may ask the client on the other end (``invoke``): the request
    carries an opaque of its own, and the client's response, flagged as one, is matched by it.

    A handler may leave work for after its answer in :attr:`after_reply` (a broker's dispatch
    of what it has just stored, as RocketMQ's ``ReputMessageService`` does it after the put
    returns): it runs once the answer is made, before the connection's next request and before
    the event loop runs anything else, whatever the handler's outcome. The answer is written
    first, unless more requests of the connection were read with it: then the answers of all
    of them go out together, in one write after the last (the threads of a client that share
    a connection send their requests together: one write for them, not one each).
    """

    def __init__(self, address: str, transport: asyncio.Transport) -> None:
        self.address = address
        self.transport = transport
        #: Requests of this connection running in their own task (held ones, suspended ones).
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._asked: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.after_reply: list[Callable[[], None]] = []

    def write(self, data: bytes) -> None:
        """Queue encoded frames on the socket (dropped once the connection is gone)."""
        if not self.closed and not self.transport.is_closing():
            self.transport.write(data)

    async def send(self, cmd: RemotingCommand) -> None:
        """Write one command, waiting while the socket's buffer is over its high-water mark."""
        if self.closed or self.transport.is_closing():
            return
        data = encode(cmd)
        while not self._writable.is_set() and not self.closed:
            await self._writable.wait()
        self.write(data)

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send the request ``cmd`` to the client and return its response; NoResponse when none
        comes within ``timeout`` seconds or the connection closes first.

        A handler of a request of this same connection that is not under ``held_codes`` must
        not ask it: reading that connection waits for the handler's answer."""
        loop = asyncio.get_running_loop()
        cmd.opaque = next(_OPAQUES) & 0x7FFFFFFF
        cmd.flag &= ~FLAG_RESPONSE
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        why = f"wait response on the channel <{self.address}> timeout, {timeout * 1000:.0f}(ms)"
        timer = loop.call_later(timeout, _fail, fut, why)
        self._asked[cmd.opaque] = fut
        try:
            if self.closed or self.transport.is_closing():
                raise NoResponse(f"the connection to <{self.address}> is closed")
            await self.send(cmd)
            return await fut
        finally:
            timer.cancel()
            self._asked.pop(cmd.opaque, None)

    def answered(self, cmd: RemotingCommand) -> None:
        """A response from the client: to the request that waits for it (else dropped, as a
        response that came after its request gave up)."""
        fut = self._asked.pop(cmd.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(cmd)

    def lost(self) -> None:
        """The connection closed: the requests waiting for a response get none."""
        self.closed = True
        self._writable.set()
        for fut in self._asked.values():
            _fail(fut, f"the connection to <{self.address}> closed before it answered")
        self._asked.clear()


def _fail(fut: asyncio.Future[RemotingCommand], why: str) -> None:
    if not fut.done():
        fut.set_exception(NoResponse(why))


def _log(msg: str) -> None:
    print(f"mqtool serve: {msg}", file=sys.stderr, flush=True)


class _Resume:
    """Await a coroutine that already ran up to its first suspension (eager start).

    ``RemotingServer`` starts every handler inline; most finish without suspending and need no
    task. One that suspended on ``pending`` goes on in a task that awaits this object.
    """

    __slots__ = ("coro", "pending")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.pending
        while True:
            try:
                value = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, as await does
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(value)
                except StopIteration as stop:
                    return stop.value


class _Connection(asyncio.Protocol):
    """The server side of one connection: bytes in, frames decoded, requests dispatched.

    Non-held requests are answered in arrival order; the answers to one read's requests go out
    in one write. A request whose handler suspends pauses reading until it is answered (its
    successors wait in ``backlog``, at most one socket read's worth). Held requests run in their
    own task. Reading also pauses while the socket's write buffer is over its high-water mark,
    so a client that does not read its answers is not read either. One timer per connection
    enforces the idle and frame timeouts.
    """

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder(server.max_frame)
        self.backlog: deque[RemotingCommand] = deque()
        self.peer: Peer | None = None
        self.transport: asyncio.Transport | None = None
        self.ordered: asyncio.Task[None] | None = None
        self.pause_reasons: set[str] = set()
        self.last = 0.0
        self.frame_since: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.eof = False
        self.failed = False
        self.held = 0  # bytes of an incomplete frame counted in server.buffered

    # -- asyncio callbacks --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):  # answers are small: never wait for Nagle
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        addr = transport.get_extra_info("peername")
        self.peer = Peer(f"{addr[0]}:{addr[1]}" if addr else "?", transport)
        self.server.peers.add(self.peer)
        self.last = self.loop.time()
        self._arm()

    def data_received(self, data: bytes) -> None:
        self.last = self.loop.time()
        busy = self.decoder.pending > 0
        try:
            cmds = self.decoder.feed(data)
        except FrameError as e:
            self._bad(str(e))
            return
        if self.decoder.pending != self.held and not self._hold(self.decoder.pending):
            return
        if not self.decoder.pending:
            self.frame_since = None
        elif cmds or not busy:  # a new frame began in this read: its timeout runs from now
            self.frame_since = self.last
            timer = self.timer
            if timer is not None and timer.when() > self.last + self.server.frame_timeout:
                timer.cancel()
                self._arm()
        if cmds:
            peer = self.peer
            assert peer is not None
            for cmd in cmds:  # responses to the server's own requests are matched at once
                if cmd.is_response:
                    peer.answered(cmd)
                else:
                    self.backlog.append(cmd)
            if self.backlog:
                self._process()

    def eof_received(self) -> bool | None:
        self.eof = True
        if self.decoder.pending:
            self._bad(self._partial_error())
            return None
        if self.ordered is not None or self.backlog or (self.peer and self.peer.tasks):
            # the client half-closed: answer what it asked, then close. Its clients are gone
            # now, as the broker's channel closes on end of input (a consumer killed with a
            # pull held leaves its group at once, not when the held pull is answered).
            if self.peer is not None and self.server.on_disconnect is not None:
                self.server.on_disconnect(self.peer)
            self.loop.call_later(self.server.frame_timeout, self._close)
            return True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.decoder.pending and not self.failed:
            self._bad(self._partial_error(), close=False)
        self._release()
        if self.timer is not None:
            self.timer.cancel()
        peer = self.peer
        if peer is None:
            return
        peer.lost()
        self.backlog.clear()
        self.server.peers.discard(peer)
        if self.server.on_disconnect is not None:
            self.server.on_disconnect(peer)

    def pause_writing(self) -> None:
        if self.peer is not None:
            self.peer._writable.clear()
        self._pause("write")

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer._writable.set()
        self._resume("write")

    # -- requests -----------------------------------------------------------------------------

    def _process(self) -> None:
        srv, peer = self.server, self.peer
        assert peer is not None
        out: list[bytes] = []
        while self.backlog and self.ordered is None and not peer.closed:
            cmd = self.backlog.popleft()
            if cmd.code in srv.held_codes:
                if len(peer.tasks) >= srv.max_held:
                    resp: RemotingCommand | None = cmd.response(
                        ResponseCode.SYSTEM_BUSY,
                        f"[PCBUSY] {srv.max_held} held requests already on this connection",
                    )
                else:  # may be held (long polling): its own task
                    self._spawn(srv._dispatch(cmd, peer))
                    continue
            else:
                try:
                    resp = srv._start(cmd, peer)
                except _Suspended as s:  # answered in order: reading waits for it
                    self.ordered = self._spawn(srv._dispatch(cmd, peer, s.awaitable))
                    self._pause("ordered")
                    break
            if resp is not None and not cmd.is_oneway:
                out.append(srv._encode(cmd, resp, peer))
            if peer.after_reply:  # the work before the next request; the answers of the
                # requests read together go out in one write, a last one's at once
                if out and not self.backlog:
                    peer.write(out[0] if len(out) == 1 else b"".join(out))
                    out = []
                srv.run_after_reply(peer)
        if out:
            peer.write(out[0] if len(out) == 1 else b"".join(out))
        if peer.after_reply:  # left by a handler that then suspended
            srv.run_after_reply(peer)
        if self.eof and self.ordered is None and not self.backlog and not peer.tasks:
            self._close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        assert self.peer is not None
        task = self.loop.create_task(coro)
        self.peer.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        assert self.peer is not None
        self.peer.tasks.discard(task)
        if task is self.ordered:
            self.ordered = None
            self._resume("ordered")
            if not self.peer.closed:
                self._process()
        elif self.eof and self.ordered is None and not self.backlog and not self.peer.tasks:
            self._close()

    # -- memory -------------------------------------------------------------------------------

    def _hold(self, pending: int) -> bool:
        """Count ``pending`` bytes of an incomplete frame against the server's cap; over it,
        this connection is closed (False)."""
        srv = self.server
        total = srv.buffered - self.held + pending
        if pending > self.held and total > srv.max_buffered:
            want = self.decoder.expected
            self._bad(
                f"{srv.buffered >> 20} MiB of incomplete frames held by all connections; "
                f"this one's {pending >> 20} MiB of a frame of {want} bytes would pass the "
                f"{srv.max_buffered >> 20} MiB cap",
                what="refused",
            )
            return False
        srv.buffered = total
        self.held = pending
        return True

    def _release(self) -> None:
        """Give back what this connection held (the decoder's buffer is freed now)."""
        self.server.buffered -= self.held
        self.held = 0
        self.decoder.reset()

    # -- flow control, timeouts, errors -------------------------------------------------------

    def _pause(self, reason: str) -> None:
        if not self.pause_reasons and self.transport is not None:
            self.transport.pause_reading()
        self.pause_reasons.add(reason)

    def _resume(self, reason: str) -> None:
        self.pause_reasons.discard(reason)
        t = self.transport
        if not self.pause_reasons and t is not None and not t.is_closing():
            t.resume_reading()
            self.last = self.loop.time()

    def _arm(self) -> None:
        srv = self.server
        if self.frame_since is not None:
            at = self.frame_since + srv.frame_timeout
        else:
            at = self.last + srv.idle_timeout
        self.timer = self.loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self.timer = None
        if self.transport is None or self.transport.is_closing():
            return
        srv, now = self.server, self.loop.time()
        if self.pause_reasons:  # we are not reading: the client is not the one being slow
            self.last = now
        elif self.frame_since is not None and now >= self.frame_since + srv.frame_timeout:
            want = self.decoder.expected
            what = "length field" if want is None else f"frame of {want} bytes"
            self._bad(f"{what} not complete after {srv.frame_timeout:.0f} s")
            return
        elif self.frame_since is None and now >= self.last + srv.idle_timeout:
            self._bad(f"idle for {srv.idle_timeout:.0f} s")
            return
        self._arm()

    def _partial_error(self) -> str:
        want, have = self.decoder.expected, self.decoder.pending
        if want is None:
            return f"connection closed inside a length field ({have} of 4 bytes)"
        return f"connection closed mid-frame ({have - LENGTH_FIELD_SIZE} of {want} bytes)"

    def _bad(self, why: str, *, close: bool = True, what: str = "bad frame") -> None:
        """A bad frame (or one refused): log one line, close this connection only."""
        self.failed = True
        srv = self.server
        srv.bad_frames += 1
        address = self.peer.address if self.peer is not None else "?"
        srv.log(f"{srv.name}: {address}: {what}: {why}; closing the connection")
        self.backlog.clear()
        if close:
            self._release()
            self._close()

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class _Suspended(Exception):  # noqa: N818 - control flow, not an error
    """A handler suspended: ``awaitable`` finishes it."""

    def __init__(self, awaitable: Awaitable[RemotingCommand | None]) -> None:
        self.awaitable = awaitable


class RemotingServer:
    """A listening remoting endpoint dispatching requests to ``handler``.

    ``handler(cmd, peer)`` is a coroutine function. For codes not in ``held_codes`` it is
    started inline, outside any task, and runs on in a task only once it suspends: code before
    its first ``await`` must not need the current task (``asyncio.timeout`` does; put such
    requests under ``held_codes`` or await something first).
    """

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
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        redact: Callable[[str], str] = str,
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
        self.max_buffered = max_buffered
        self.redact = redact  # takes server paths out of an answer's remark
        self.peers: set[Peer] = set()
        self.bad_frames = 0
        self.buffered = 0  # bytes of incomplete frames held by all connections
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._accepting: set[asyncio.Task[None]] = set()
        self._retry: asyncio.TimerHandle | None = None
        self._retry_delay = 0.0  # > 0 while an out-of-descriptors episode lasts
        self._os_errors_said: dict[int, float] = {}
        self._unsupported_said: set[int] = set()  # request codes said not served

    async def start(self, host: str, port: int) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        sock = socket.create_server(address, family=family, backlog=ACCEPT_BACKLOG)
        sock.setblocking(False)
        self._sock, self._loop = sock, loop
        loop.add_reader(sock.fileno(), self._accept)
        return int(sock.getsockname()[1])

    # -- accepting ------------------------------------------------------------------------------

    def _accept(self) -> None:
        sock, loop = self._sock, self._loop
        assert sock is not None and loop is not None
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _addr = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno not in _OUT_OF_RESOURCE:
                    self.log(f"{self.name}: accept failed: {e.strerror or e}")
                    return
                self._back_off(e)
                return
            self._retry_delay = 0.0  # the episode, if any, is over
            conn.setblocking(False)
            task = loop.create_task(self._connect(conn))
            self._accepting.add(task)
            task.add_done_callback(self._accepting.discard)

    def _back_off(self, e: OSError) -> None:
        """Out of descriptors: stop watching the listening socket, look again after a delay
        that doubles up to ACCEPT_RETRY_MAX; said once per episode."""
        assert self._sock is not None and self._loop is not None
        if not self._retry_delay:
            self.log(
                f"{self.name}: cannot accept connections: {e.strerror or e} "
                f"({len(self.peers)} open); trying again with back-off up to "
                f"{ACCEPT_RETRY_MAX:g} s (said once until a connection is accepted again)"
            )
            self._retry_delay = ACCEPT_RETRY_FIRST
        else:
            self._retry_delay = min(ACCEPT_RETRY_MAX, self._retry_delay * 2)
        self._loop.remove_reader(self._sock.fileno())
        self._retry = self._loop.call_later(self._retry_delay, self._watch_again)

    def _watch_again(self) -> None:
        self._retry = None
        if self._sock is not None and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._accept)

    async def _connect(self, conn: socket.socket) -> None:
        assert self._loop is not None
        try:
            await self._loop.connect_accepted_socket(lambda: _Connection(self), conn)
        except asyncio.CancelledError:
            conn.close()
            raise
        except OSError as e:  # the connection went away (or no resource for it): drop it
            conn.close()
            self.log(f"{self.name}: dropped an accepted connection: {e.strerror or e}")

    # -- answers --------------------------------------------------------------------------------

    def _error_response(self, cmd: RemotingCommand, peer: Peer, e: Exception) -> RemotingCommand:
        if isinstance(e, UnsupportedCode):
            if cmd.code not in self._unsupported_said:
                self._unsupported_said.add(cmd.code)
                self.log(
                    f"{self.name}: request code {cmd.code} is not served (answered "
                    "REQUEST_CODE_NOT_SUPPORTED; said once per code)"
                )
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        if isinstance(e, MqtoolError):  # bad header field, body or store request: answered
            return cmd.response(ResponseCode.SYSTEM_ERROR, self.redact(str(e)))
        if isinstance(e, OSError):  # e.g. out of descriptors: the reason, not the file
            self._say_os_error(cmd, peer, e)
            return cmd.response(ResponseCode.SYSTEM_ERROR, e.strerror or type(e).__name__)
        # a handler bug must not kill the server
        self.log(f"{self.name}: {peer.address}: code {cmd.code} failed: {type(e).__name__}: {e}")
        return cmd.response(ResponseCode.SYSTEM_ERROR, self.redact(f"{type(e).__name__}: {e}"))

    def _say_os_error(self, cmd: RemotingCommand, peer: Peer, e: OSError) -> None:
        """A handler's OSError on stderr (with its file), once a minute per errno."""
        now = asyncio.get_running_loop().time()
        key = e.errno or 0
        if now - self._os_errors_said.get(key, -OS_ERROR_LOG_INTERVAL) >= OS_ERROR_LOG_INTERVAL:
            self._os_errors_said[key] = now
            self.log(
                f"{self.name}: {peer.address}: code {cmd.code} failed: {e} (answered "
                f"SYSTEM_ERROR; said at most once every {OS_ERROR_LOG_INTERVAL:g} s)"
            )

    def _start(self, cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
        """Run the handler inline up to its first suspension (then raise _Suspended)."""
        try:
            coro = self.handler(cmd, peer)
            if coro is None or isinstance(coro, RemotingCommand):  # a plain function's answer
                return coro
            if not asyncio.iscoroutine(coro):
                raise _Suspended(coro)
            try:
                pending = coro.send(None)
            except StopIteration as stop:
                result: RemotingCommand | None = stop.value
                return result
            raise _Suspended(_Resume(coro, pending))
        except _Suspended:
            raise
        except Exception as e:  # noqa: BLE001 - answered (see _error_response)
            return self._error_response(cmd, peer, e)

    def _encode(self, cmd: RemotingCommand, resp: RemotingCommand, peer: Peer) -> bytes:
        try:
            return encode(resp, max_frame=self.max_frame)
        except RemotingError as e:  # e.g. an answer over the frame limit
            return encode(self._error_response(cmd, peer, e), max_frame=self.max_frame)

    async def _dispatch(
        self,
        cmd: RemotingCommand,
        peer: Peer,
        started: Awaitable[RemotingCommand | None] | None = None,
    ) -> None:
        try:
            resp = await (started if started is not None else self.handler(cmd, peer))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - answered (see _error_response)
            resp = self._error_response(cmd, peer, e)
        if resp is not None and not cmd.is_oneway and not peer.closed:
            data = self._encode(cmd, resp, peer)
            # with work left for after the answer, no wait: the work may not wait either
            while not peer._writable.is_set() and not peer.closed and not peer.after_reply:
                await peer._writable.wait()
            peer.write(data)
        if peer.after_reply:
            self.run_after_reply(peer)

    def run_after_reply(self, peer: Peer) -> None:
        """Run the work handlers left in ``peer.after_reply``. The answers are made (written, or
        to be written with those of the requests read with them): a failure is said on stderr
        (what failed, on which connection), not answered."""
        work, peer.after_reply = peer.after_reply, []
        for fn in work:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - said (the answer is already out)
                self.log(f"{self.name}: {peer.address}: the work after an answer failed: "
                         f"{type(e).__name__}: {e}")

    def stop_accepting(self) -> None:
        """Close the listening socket; established connections go on."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()
        for t in list(self._accepting):
            t.cancel()

    async def in_flight(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for requests being handled."""
        tasks = {t for p in self.peers for t in p.tasks}
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def close(self, timeout: float = 2.0) -> None:
        """Close the listener and every connection; return once their sockets are closed
        (descriptors given back), aborting those still flushing answers after ``timeout``."""
        self.stop_accepting()
        if self._accepting:
            await asyncio.gather(*self._accepting, return_exceptions=True)
        for p in list(self.peers):
            p.closed = True
            for t in list(p.tasks):
                t.cancel()
            p.transport.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.peers and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for p in list(self.peers):
            p.transport.abort()
        for _ in range(10):  # abort() closes on the next loop iteration
            if not self.peers:
                break
            await asyncio.sleep(0)
