"""The broker settings ``mqtool serve`` honours, read from the broker's own config file.

``--broker-conf FILE`` is the file a real broker is started with (``mqbroker -c FILE``, Java
properties read by :func:`~mqtool.formats.config.properties.load_properties`). The keys below
are honoured with the broker's defaults (``BrokerConfig`` / ``MessageStoreConfig`` of 4.9.7 and
5.3.3, which agree on all but ``transactionCheckInterval``); any other key is named once on
stderr as not honoured. Values are parsed as the broker's setters take them
(``Boolean.parseBoolean``: only ``true``, any case, is true; ``Integer``/``Long`` in range).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mqtool.formats.config.properties import load_properties
from mqtool.formats.errors import MqtoolError

#: ``BrokerConfig.transactionCheckInterval`` per version (ms).
CHECK_INTERVAL_4 = 60_000
CHECK_INTERVAL_5 = 30_000


class BrokerConfError(MqtoolError):
    """A broker.conf value serve cannot take (the message names the key and the value)."""


@dataclass(frozen=True)
class BrokerSettings:
    """What a broker.conf says, for the keys serve honours (``None``: the version's default)."""

    #: ``autoCreateTopicEnable``: a send to an unknown topic creates it from TBW102.
    autoCreateTopicEnable: bool = True
    #: ``autoCreateSubscriptionGroup``: a heartbeat or pull of an unknown group creates it.
    autoCreateSubscriptionGroup: bool = True
    #: ``defaultTopicQueueNums``: TBW102's queues (a topic created on send gets at most these).
    defaultTopicQueueNums: int = 8
    #: ``maxMessageSize`` (MessageStoreConfig): a whole record larger than this is refused.
    maxMessageSize: int = 4 * 1024 * 1024
    #: ``messageDelayLevel`` (MessageStoreConfig); None: the store's.
    messageDelayLevel: str | None = None
    #: ``enablePropertyFilter``: SQL92 subscriptions accepted.
    enablePropertyFilter: bool = False
    #: ``notifyConsumerIdsChangedEnable``: tell a group's consumers when it changes.
    notifyConsumerIdsChangedEnable: bool = True
    #: ``rejectTransactionMessage``: a half message is refused (NO_PERMISSION).
    rejectTransactionMessage: bool = False
    #: ``transactionTimeOut`` (ms): a half message younger than this is not checked yet.
    transactionTimeOut: int = 6_000
    #: ``transactionCheckMax``: checks of one half message before it is discarded.
    transactionCheckMax: int = 15
    #: ``transactionCheckInterval`` (ms); None: the version's (60 s in 4.x, 30 s in 5.x).
    transactionCheckInterval: int | None = None
    #: ``regionId``: answered on every send; 5.x also stores it (``MSG_REGION``).
    regionId: str = "DefaultRegion"
    #: ``traceOn``: answered on every send; 5.x also stores it (``TRACE_ON``).
    traceOn: bool = True

    def check_interval(self, v5: bool) -> int:
        if self.transactionCheckInterval is not None:
            return self.transactionCheckInterval
        return CHECK_INTERVAL_5 if v5 else CHECK_INTERVAL_4


_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
#: The Java type of each honoured key's setter.
_KINDS = {
    "autoCreateTopicEnable": "bool", "autoCreateSubscriptionGroup": "bool",
    "defaultTopicQueueNums": "int", "maxMessageSize": "int", "messageDelayLevel": "str",
    "enablePropertyFilter": "bool", "notifyConsumerIdsChangedEnable": "bool",
    "rejectTransactionMessage": "bool", "transactionTimeOut": "long",
    "transactionCheckMax": "int", "transactionCheckInterval": "long",
    "regionId": "str", "traceOn": "bool",
}
assert set(_KINDS) == {f.name for f in fields(BrokerSettings)}


def _value(key: str, raw: str) -> Any:
    kind = _KINDS[key]
    if kind == "str":
        return raw
    if kind == "bool":
        return raw.lower() == "true"
    lo, hi = _INT if kind == "int" else _LONG
    try:
        v = int(raw)
    except ValueError:
        raise BrokerConfError(f"broker.conf: {key}={raw!r} is not a number") from None
    if not lo <= v <= hi:
        raise BrokerConfError(f"broker.conf: {key}={raw} is out of range")
    return v


#: Keys the broker reads only when it starts (the store's own settings): serve takes them from
#: ``--broker-conf`` and not from ``mqadmin updateBrokerConfig``.
AT_START = frozenset({"maxMessageSize", "messageDelayLevel"})


def read_broker_conf(path: str | Path) -> tuple[BrokerSettings, list[str]]:
    """The settings of a broker config file and the keys in it serve does not honour."""
    return updated(BrokerSettings(), load_properties(path))


def updated(settings: BrokerSettings, props: dict[str, str], *, at_start: bool = True
            ) -> tuple[BrokerSettings, list[str]]:
    """``settings`` with the honoured keys of ``props`` set, and the keys not taken (not
    honoured, or with ``at_start`` False a key read only at start)."""
    taken = set(_KINDS) if at_start else set(_KINDS) - AT_START
    given = {k: _value(k, v) for k, v in props.items() if k in taken}
    settings = replace(settings, **given)
    if settings.maxMessageSize <= 0:
        raise BrokerConfError(f"broker.conf: maxMessageSize={settings.maxMessageSize}")
    if settings.defaultTopicQueueNums <= 0:
        raise BrokerConfError(
            f"broker.conf: defaultTopicQueueNums={settings.defaultTopicQueueNums}")
    return settings, sorted(k for k in props if k not in taken)
