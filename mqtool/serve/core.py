"""What the broker's request handlers share (:class:`BrokerCore`), so the send, transaction
and admin handlers read the broker's state without importing :mod:`mqtool.serve.broker`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from mqtool.refstore.engine import PutResult, RefStore
from mqtool.remoting import headers as H
from mqtool.remoting.transport import Peer
from mqtool.serve.config import BrokerSettings


@dataclass
class ClientInfo:
    """A client that sent HEART_BEAT on a connection."""

    client_id: str
    peer: Peer


class BrokerCore(Protocol):
    """The broker as its handlers see it (:class:`mqtool.serve.broker.Broker`)."""

    store: RefStore
    settings: BrokerSettings
    host: str  #: brokerIP1
    counts: dict[str, int]
    consumers: dict[str, dict[str, ClientInfo]]  #: group -> client id -> connection
    producers: dict[str, dict[str, ClientInfo]]

    def notify_put(self, results: Iterable[PutResult]) -> None:
        """Wake held pulls of the queues just written."""

    def retry_or_dlq(
        self, h: H.SendMessageRequestHeader, props: dict[str, str]
    ) -> H.SendMessageRequestHeader:
        """A client's own send to ``%RETRY%<group>``: where it goes."""

    def half_put(self) -> None:
        """A half message was stored (the check service has work)."""
