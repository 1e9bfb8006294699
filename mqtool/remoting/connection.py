"""A client connection to a remoting server: requests sent, responses matched by opaque."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable

from mqtool.remoting.codes import FLAG_ONEWAY
from mqtool.remoting.frame import (
    DEFAULT_MAX_FRAME,
    RemotingCommand,
    RemotingError,
    encode,
    read_command,
)


class Connection:
    """A client connection: ``invoke`` sends a request and awaits the response with its opaque.

    Requests the server pushes (e.g. NOTIFY_CONSUMER_IDS_CHANGED) go to ``on_request`` when set;
    ``respond`` answers those that want an answer.
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

    def respond(self, cmd: RemotingCommand) -> None:
        """Write ``cmd``, a response to a request the server sent (its opaque kept)."""
        self._writer.write(encode(cmd, max_frame=self.max_frame))

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
