"""What the broker's request handlers share (:class:`BrokerCore`), so the send, transaction
and admin handlers read the broker's state without importing :mod:`mqtool.serve.broker`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from mqtool.refstore.engine import PutResult, RefStore
from mqtool.remoting import headers
from mqtool.remoting.bodies import ConsumerData
from mqtool.remoting.server import Peer
from mqtool.serve.config import BrokerSettings


@dataclass
class ClientInfo:
    """A client that sent HEART_BEAT on a connection (its frame's language and version; for a
    consumer, what it said about its group)."""

    client_id: str
    peer: Peer
    language: str = "JAVA"
    version: int = 0
    consumer: ConsumerData | None = None


class BrokerCore(Protocol):
    """The broker as its handlers see it (:class:`mqtool.serve.broker.Broker`)."""

    store: RefStore
    settings: BrokerSettings
    host: str  #: brokerIP1
    counts: dict[str, int]
    boot_ms: int  #: when serve started (epoch ms)
    consumers: dict[str, dict[str, ClientInfo]]  #: group -> client id -> connection
    producers: dict[str, dict[str, ClientInfo]]

    def notify_put(self, results: Iterable[PutResult]) -> None:
        """Wake held pulls of the queues just written."""

    def retry_or_dlq(
        self, h: headers.SendMessageRequestHeader, props: dict[str, str]
    ) -> headers.SendMessageRequestHeader:
        """A client's own send to ``%RETRY%<group>``: where it goes."""

    def half_put(self) -> None:
        """A half message was stored (the check service has work)."""

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min offset, max offset) of a consume queue."""

    def offset_at_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first queue offset stored at or after ``timestamp``."""

    def log(self, line: str) -> None:
        """Say ``line`` on the server's stderr."""
