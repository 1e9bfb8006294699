"""``config/subscriptionGroup.json``: ``SubscriptionGroupManager``'s group table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.config.fastjson import dumps_fastjson
from mqtool.formats.config.fields import DataVersion, load_object
from mqtool.formats.errors import FormatError
from mqtool.formats.rules import DEFAULT_MAX_RECONSUME_TIMES

SUBSCRIPTION_GROUP_TABLE_CAPACITY = 1024  # SubscriptionGroupManager.subscriptionGroupTable

def default_subscription_group_fields(group_name: str) -> dict[str, Any]:
    """The fields a 5.x broker writes for a new ``SubscriptionGroupConfig`` (defaults)."""
    return {
        "attributes": {},
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": group_name,
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": DEFAULT_MAX_RECONSUME_TIMES,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` of ``subscriptionGroup.json``.

    The typed properties cover what tools read; ``fields`` holds every serialized bean field
    (camelCase, as written) so that unknown/newer fields survive a rewrite.
    """

    fields: Mapping[str, Any]

    @property
    def group_name(self) -> str:
        """Consumer group name."""
        return str(self.fields.get("groupName", ""))

    @property
    def consume_enable(self) -> bool:
        """Whether consumption is enabled (default true)."""
        return bool(self.fields.get("consumeEnable", True))

    @property
    def retry_max_times(self) -> int:
        """Reconsume attempts before the DLQ (default 16)."""
        return int(self.fields.get("retryMaxTimes", DEFAULT_MAX_RECONSUME_TIMES))

    @property
    def retry_queue_nums(self) -> int:
        """Number of ``%RETRY%`` queues (default 1)."""
        return int(self.fields.get("retryQueueNums", 1))

    @property
    def consume_broadcast_enable(self) -> bool:
        """Whether broadcast consumption is allowed (default true)."""
        return bool(self.fields.get("consumeBroadcastEnable", True))


@dataclass(frozen=True, slots=True)
class SubscriptionGroups:
    """``subscriptionGroup.json`` (``SubscriptionGroupWrapper`` / ``SubscriptionGroupManager``)."""

    subscription_group_table: Mapping[str, SubscriptionGroupConfig]
    data_version: DataVersion | None = None
    forbidden_table: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_subscription_groups(text: str, *, file: str | None = None) -> SubscriptionGroups:
    """Parse ``subscriptionGroup.json`` text."""
    obj = load_object(text, file, "subscriptionGroup.json")
    table = obj.get("subscriptionGroupTable", {})
    if not isinstance(table, Mapping):
        raise FormatError(file, None, "subscriptionGroupTable: expected an object")
    groups: dict[str, SubscriptionGroupConfig] = {}
    for name, cfg in table.items():
        if not isinstance(cfg, Mapping) or not isinstance(name, str):
            raise FormatError(file, None, f"subscriptionGroupTable[{name!r}]: expected an object")
        groups[name] = SubscriptionGroupConfig(fields=dict(cfg))
    forbidden = obj.get("forbiddenTable")
    if forbidden is not None and not isinstance(forbidden, Mapping):
        raise FormatError(file, None, "forbiddenTable: expected an object")
    dv = obj.get("dataVersion")
    known = ("subscriptionGroupTable", "dataVersion", "forbiddenTable")
    return SubscriptionGroups(
        subscription_group_table=groups,
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        forbidden_table=None if forbidden is None else dict(forbidden),
        extra={k: v for k, v in obj.items() if k not in known},
    )


def build_subscription_groups(groups: SubscriptionGroups) -> str:
    """``subscriptionGroup.json`` text; groups in the given order, bean fields sorted."""
    obj: dict[str, Any] = dict(groups.extra)
    if groups.data_version is not None:
        obj["dataVersion"] = groups.data_version.to_json_obj()
    if groups.forbidden_table is not None:
        obj["forbiddenTable"] = dict(groups.forbidden_table)
    obj["subscriptionGroupTable"] = {
        name: {k: cfg.fields[k] for k in sorted(cfg.fields)}
        for name, cfg in groups.subscription_group_table.items()
    }
    return dumps_fastjson({k: obj[k] for k in sorted(obj)}, pretty=True)
