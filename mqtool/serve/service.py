"""``mqtool serve``: a name server and a broker in one process over a reference store.

Lifecycle: open (or create) the store, which takes its ``lock`` (a store locked by another
process is refused) and keeps ``abort`` present while serving; listen on both ports; run the
schedule service (due delayed messages delivered from SCHEDULE_TOPIC_XXXX, ``delayOffset.json``
persisted by the engine) and a flush every 5 s (``flushConsumerOffsetInterval``: consumer offsets,
checkpoint). SIGTERM/SIGINT: stop accepting, answer held pulls, finish in-flight requests,
close every connection (their descriptors given back, so the store can write its files even
after the process ran out of them), close the store (offsets, checkpoint, ``abort`` removed,
lock released), return 0. Answers never name the store's path (``<store>`` stands for it).

Requests arrive through :class:`mqtool.remoting.server.RemotingServer`, which reads frames and
hands them to this service's handlers.
"""

from __future__ import annotations

import asyncio
import errno
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from mqtool.formats.errors import MqtoolError
from mqtool.refstore import redelivery
from mqtool.refstore.engine import RefStore
from mqtool.refstore.mapped import PendingFlush
from mqtool.refstore.put import load_batch_encoder
from mqtool.remoting.codes import RequestCode
from mqtool.remoting.frame import RemotingCommand
from mqtool.remoting.server import Peer, RemotingServer
from mqtool.serve.broker import Broker
from mqtool.serve.config import BrokerConfError, BrokerSettings, read_broker_conf
from mqtool.serve.namesrv import NameServer

#: ``flushConsumerOffsetInterval`` (5 s).
FLUSH_INTERVAL = 5.0
#: Longest the schedule service sleeps between looks (a new delayed message wakes it sooner).
SCHEDULE_MAX_SLEEP = 1.0
#: Time in-flight requests get to finish on shutdown.
DRAIN_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServeOptions:
    """What ``mqtool serve`` was asked for."""

    store: Path
    host: str = "127.0.0.1"
    namesrv_port: int = 9876
    broker_port: int = 10911
    broker_name: str = "broker-a"
    cluster: str = "DefaultCluster"
    delay_levels: str | None = None
    max_reconsume_times: int | None = None
    #: The RocketMQ version the store is written as (``4.9.7`` or ``5.3.3``); None: the
    #: store's own (a new store: 4.9.7).
    dialect: str | None = None
    #: What ``--broker-conf`` says (the broker's defaults when not given).
    settings: BrokerSettings = BrokerSettings()


_T = TypeVar("_T")

DIALECTS = ("4.9.7", "5.3.3")


def serve_options(
    broker_conf: Path | None, dialect: str | None, opts: ServeOptions,
    log: Callable[[str], None] | None = None,
) -> ServeOptions:
    """``opts`` with the settings of ``broker_conf`` and the ``dialect``; the keys of the file
    serve does not honour are said once (``log``, default stderr)."""
    if dialect is not None and dialect not in DIALECTS:
        raise BrokerConfError(f"--dialect {dialect}: not one of {', '.join(DIALECTS)}")
    if broker_conf is None:
        return replace(opts, dialect=dialect)
    settings, ignored = read_broker_conf(broker_conf)
    if ignored:
        (log or _log)(f"{broker_conf}: not honoured by mqtool serve: {', '.join(ignored)}")
    return replace(opts, dialect=dialect, settings=settings)


def _log(msg: str) -> None:
    print(f"mqtool serve: {msg}", file=sys.stderr, flush=True)


def open_served_store(opts: ServeOptions, broker_port: int) -> RefStore:
    """Open the store with the serving broker's identity (store host, names, delay levels).

    The store's saved settings are kept except those the options name; when they differ the
    store is reopened with them (and they are saved, as the broker's config would be).
    """
    levels = opts.delay_levels or opts.settings.messageDelayLevel
    if levels is not None:
        redelivery.parse_delay_levels(levels)  # refused before the store is touched
    store = RefStore.open(opts.store)
    try:
        want = replace(
            store.config,
            store_host=f"{opts.host}:{broker_port}",
            broker_name=opts.broker_name,
            cluster_name=opts.cluster,
            message_delay_level=levels or store.config.message_delay_level,
            max_message_size=opts.settings.maxMessageSize,
            dialect=opts.dialect or store.config.dialect,
            default_max_reconsume_times=(
                opts.max_reconsume_times
                if opts.max_reconsume_times is not None
                else store.config.default_max_reconsume_times
            ),
        )
    except BaseException:
        store.close()
        raise
    if want != store.config:
        store.close()
        store = RefStore.open(opts.store, want)
    return store


class Service:
    """The running server (``start`` then ``stop``), usable in tests without signals."""

    def __init__(self, opts: ServeOptions, log: Callable[[str], None] = _log) -> None:
        self.opts = opts
        self.log = log
        self.store: RefStore | None = None
        self.broker: Broker | None = None
        self.broker_server: RemotingServer | None = None
        self.ns_server: RemotingServer | None = None
        self.namesrv_addr = ""
        self.broker_addr = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._encoder_loaded: asyncio.Future[None] | None = None
        self._schedule_event = asyncio.Event()
        self._said: set[str] = set()  # background work whose failure was said (_round)
        roots = {str(opts.store), str(opts.store.resolve())}
        self._roots = sorted(roots, key=len, reverse=True)

    def _load_batch_encoder(self, loop: asyncio.AbstractEventLoop,
                            done: asyncio.Future[None]) -> None:
        """The compiled batch encoder, loaded beside the start (batches take the Python
        encoder until it is; a failure is said once and leaves them there); ``done`` is set
        when it is over."""
        try:
            load_batch_encoder()
        except Exception as e:  # numba missing or broken: the Python encoder serves
            self.log(f"serve: the compiled batch encoder is not available, batches take the "
                     f"Python encoder: {type(e).__name__}: {e}")
        finally:
            try:
                loop.call_soon_threadsafe(_set_done, done)
            except RuntimeError:  # the loop is closed: serve stopped meanwhile
                pass

    async def warmed(self) -> None:
        """Wait until the compiled batch encoder is loaded (or known unavailable)."""
        if self._encoder_loaded is not None:
            await asyncio.shield(self._encoder_loaded)

    def redact(self, text: str) -> str:
        """``text`` with the store's path written as ``<store>`` (for answers to clients)."""
        for root in self._roots:
            text = text.replace(root, "<store>")
        return text

    async def start(self) -> None:
        """Listen on both ports and open the store (StoreLockedError when it is taken)."""
        opts = self.opts
        holder: dict[str, Broker | NameServer] = {}
        loop = asyncio.get_running_loop()
        self._encoder_loaded = loop.create_future()
        threading.Thread(target=self._load_batch_encoder, args=(loop, self._encoder_loaded),
                         name="mqtool-jit", daemon=True).start()

        async def broker_handle(cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
            return await holder["broker"].handle(cmd, peer)

        async def ns_handle(cmd: RemotingCommand, peer: Peer) -> RemotingCommand | None:
            return await holder["ns"].handle(cmd, peer)

        def disconnected(peer: Peer) -> None:
            b = holder.get("broker")
            if isinstance(b, Broker):
                b.disconnected(peer)

        self.broker_server = RemotingServer(
            broker_handle,
            name="broker",
            log=self.log,
            on_disconnect=disconnected,
            held_codes=frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE}),
            redact=self.redact,
        )
        self.ns_server = RemotingServer(ns_handle, name="namesrv", log=self.log, redact=self.redact)
        try:
            bport = await self.broker_server.start(opts.host, opts.broker_port)
            nport = await self.ns_server.start(opts.host, opts.namesrv_port)
            self.store = open_served_store(opts, bport)
        except BaseException:
            await self.broker_server.close()
            await self.ns_server.close()
            raise
        # a full buffer of index keys is written after the answer of the put that filled it
        self.store.index.on_due = lambda: loop.call_soon(self._write_index)
        self.broker_addr = f"{opts.host}:{bport}"
        self.namesrv_addr = f"{opts.host}:{nport}"
        self.broker = Broker(
            self.store,
            broker_name=opts.broker_name,
            on_schedule=self._schedule_event,
            settings=opts.settings,
            log=self.log,
        )
        holder["broker"] = self.broker
        holder["ns"] = NameServer(
            self.store,
            cluster=opts.cluster,
            broker_name=opts.broker_name,
            broker_addr=self.broker_addr,
            settings=opts.settings,
        )
        self._tasks = [
            asyncio.create_task(self._schedule_loop()),
            asyncio.create_task(self._flush_loop()),
            asyncio.create_task(self._check_loop()),
        ]

    def ready_line(self) -> str:
        """What ``mqtool serve`` prints once both ports listen."""
        return (
            f"mqtool serve: ready namesrv {self.namesrv_addr} broker {self.opts.broker_name} "
            f"{self.broker_addr} cluster {self.opts.cluster} store {self.opts.store}"
        )

    async def _schedule_loop(self) -> None:
        assert self.store is not None and self.broker is not None
        store, broker = self.store, self.broker
        while True:
            self._schedule_event.clear()
            delivered = self._round("schedule", store.tick) or []
            if delivered:
                broker.notify_put(delivered)
            due = store.next_due()
            sleep = SCHEDULE_MAX_SLEEP
            if due is not None:
                sleep = min(sleep, max(0.01, (due - store.clock()) / 1000))
            try:
                await asyncio.wait_for(self._schedule_event.wait(), sleep)
            except TimeoutError:
                pass

    async def _check_loop(self) -> None:
        """The transaction check service: a round every ``transactionCheckInterval``."""
        assert self.store is not None and self.broker is not None
        interval = self.opts.settings.check_interval(self.store.config.v5) / 1000
        transactions = self.broker.transactions
        while True:
            await asyncio.sleep(interval)
            for peer, request in self._round("transaction check", transactions.check_round) or []:
                await peer.send(request)

    def _write_index(self) -> None:
        """The index keys the puts buffered (asked for by ``IndexBuilder.on_due``)."""
        if self.store is not None:
            self._round("index", self.store.index.write_buffered)

    async def _flush_loop(self) -> None:
        """A flush every FLUSH_INTERVAL, its disk writes on a thread of their own while requests
        are served (the broker's flush services are threads too): a flush under a steady load
        writes hundreds of MiB."""
        store = self.store
        assert store is not None
        loop = asyncio.get_running_loop()

        def begin() -> PendingFlush | None:
            try:
                return store.flush_begin(dup=True)
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                store.flush()  # no descriptors to spare for the thread: the whole flush here
                return None

        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            # its own name: a start that succeeds does not silence a sync that keeps failing
            pending = self._round("flush start", begin)
            if pending is None:
                continue
            synced = loop.run_in_executor(None, pending.sync)
            await asyncio.wait([synced])

            def end(synced: asyncio.Future[None] = synced, pending: PendingFlush = pending) -> None:
                synced.result()  # the thread's OSError, if any, is the round's
                store.flush_end(pending)

            self._round("flush", end)

    def _round(self, what: str, work: Callable[[], _T]) -> _T | None:
        """One round of background work; a failure of mqtool's (e.g. a full disk) or of the
        system (e.g. out of file descriptors) is one line on stderr, said again only after a
        round has succeeded since (a full disk fails every round, each time naming a new file),
        and the next round tries again. None then."""
        try:
            result = work()
        except (MqtoolError, OSError) as e:
            if what not in self._said:
                self._said.add(what)
                self.log(f"{what} failed: {e} (tried again every round; said once)")
            return None
        self._said.discard(what)
        return result

    async def stop(self) -> None:
        """Graceful shutdown: stop accepting, drain, close the store."""
        servers = [s for s in (self.broker_server, self.ns_server) if s is not None]
        for s in servers:
            s.stop_accepting()
        if self.broker is not None:
            self.broker.stopping = True
            self.broker.waiters.notify_all()
        for s in servers:
            await s.in_flight(DRAIN_TIMEOUT)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        for s in servers:
            await s.close()
        if self.store is not None:
            self.store.close()
            self.store = None


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def run(opts: ServeOptions, ready: Callable[[str], None]) -> dict[str, int]:
    """Serve until SIGTERM/SIGINT; return the broker's counters."""
    svc = Service(opts)
    await svc.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        # ready once the compiled batch encoder is loaded too (the ports already serve)
        await asyncio.wait({asyncio.ensure_future(svc.warmed()), stopping},
                           return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            ready(svc.ready_line())
            await stopping
        _log("shutting down (signal received)")
    finally:
        stopping.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await svc.stop()
    assert svc.broker is not None
    return dict(svc.broker.counts)


def serve(opts: ServeOptions, ready: Callable[[str], None]) -> dict[str, int]:
    """Blocking entry point for the CLI."""
    return asyncio.run(run(opts, ready))


__all__ = ["ServeOptions", "Service", "open_served_store", "run", "serve", "serve_options"]
