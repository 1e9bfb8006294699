"""``mqtool serve``'s service in the test's own process, with a connection to its broker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mqtool.remoting.connection import Connection
from mqtool.serve.service import ServeOptions, Service


def serve_in_process(root: Path, body: Callable[[Service, Connection], Awaitable[None]],
                     **opts: Any) -> None:
    """Serve the store at ``root`` (``opts``: more ServeOptions) on free ports of this
    process, run ``body`` with a connection to the broker, then stop."""
    svc = Service(ServeOptions(store=root, namesrv_port=0, broker_port=0, **opts),
                  log=lambda line: None)

    async def main() -> None:
        await svc.start()
        host, port = svc.broker_addr.rsplit(":", 1)
        br = await Connection.open(host, int(port))
        try:
            await body(svc, br)
        finally:
            await br.close()
            await svc.stop()

    asyncio.run(main())
