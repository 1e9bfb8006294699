"""The broker's config files (delayOffset, consumerOffset, topics, subscriptionGroup): loaded
through the one loader, persisted with ``.bak``; topics and groups created as the broker does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqtool.formats.config import (
    CONSUMER_OFFSET_TABLE_CAPACITY,
    SUBSCRIPTION_GROUP_TABLE_CAPACITY,
    TOPIC_CONFIG_TABLE_CAPACITY,
    ConsumerOffsets,
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroups,
    TopicConfig,
    TopicConfigs,
    build_consumer_offset,
    build_delay_offset,
    build_subscription_groups,
    build_topics,
    chm_order,
    default_subscription_group_fields,
    load_config,
)
from mqtool.formats.errors import Finding
from mqtool.formats.rules import store_name_refusal
from mqtool.refstore import redelivery
from mqtool.refstore.mapped import RefStoreError
from mqtool.refstore.persist import atomic_write
from mqtool.refstore.values import StoreConfig


class BrokerConfigs:
    """The tables of the four config files, in memory, and their persistence."""

    def __init__(self, root: Path, config: StoreConfig, clock: Callable[[], int]) -> None:
        self.root = root
        self.config = config
        self.clock = clock
        self.delay_offsets: dict[int, int] = {}
        self.consumer_offsets: dict[str, dict[int, int]] = {}
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self.findings: list[Finding] = []  # what went wrong loading them
        self.offsets_dirty = False  # consumer offsets committed since the last persist
        self._versions: dict[str, int] = {}

    def _data_version(self, name: str) -> DataVersion:
        counter = self._versions.get(name, 0)
        return DataVersion(counter, self.clock(), 0 if self.config.v5 else None)

    def _read_config(self, name: str) -> Any:
        """``ConfigManager#load`` (``.bak`` fallback): the model or None; what went wrong is
        kept in :attr:`findings`."""
        loaded = load_config(self.root, name)
        self.findings.extend(loaded.findings)
        return loaded.value

    def load(self) -> None:
        """Read the four files (``ConfigManager#load``); a store without topics.json gets the
        system topics."""
        self.findings.clear()
        delay = self._read_config("delayOffset.json")
        if delay is not None:
            self.delay_offsets = dict(delay.offset_table)
        offsets = self._read_config("consumerOffset.json")
        if offsets is not None:
            self.consumer_offsets = {k: dict(v) for k, v in offsets.offset_table.items()}
            if offsets.data_version is not None:
                self._versions["consumerOffset"] = offsets.data_version.counter
        topics = self._read_config("topics.json")
        if topics is not None:
            self.topics = dict(topics.topic_config_table)
            if topics.data_version is not None:
                self._versions["topics"] = topics.data_version.counter
        else:
            self._create_system_topics()
        groups = self._read_config("subscriptionGroup.json")
        if groups is not None:
            self.groups = dict(groups.subscription_group_table)
            if groups.data_version is not None:
                self._versions["subscriptionGroup"] = groups.data_version.counter

    def _create_system_topics(self) -> None:
        # TopicConfigManager's constructor (the ones a store-only broker needs)
        for name, qn, perm in (
            ("SELF_TEST_TOPIC", 1, 6),
            ("TBW102", 8, 7),
            ("OFFSET_MOVED_EVENT", 1, 6),
            (redelivery.SCHEDULE_TOPIC, 18, 6),
        ):
            self.topics[name] = TopicConfig(
                name, qn, qn, perm, attributes={} if self.config.v5 else None
            )
        self.persist_topics()

    def persist_delay_offsets(self) -> None:
        """``config/delayOffset.json`` (atomically, with ``.bak``)."""
        dv = self._data_version("delayOffset") if self.config.v5 else None
        atomic_write(
            self.root / "config" / "delayOffset.json",
            build_delay_offset(self.delay_offsets, dv), fsync=self.config.fsync_configs,
        )

    def persist_consumer_offsets(self) -> None:
        """``config/consumerOffset.json``."""
        self._versions["consumerOffset"] = self._versions.get("consumerOffset", 0) + 1
        keys = [str(k) for k in chm_order(self.consumer_offsets, CONSUMER_OFFSET_TABLE_CAPACITY)]
        table = {k: self.consumer_offsets[k] for k in keys}
        if self.config.v5:
            text = build_consumer_offset(
                ConsumerOffsets(table, self._data_version("consumerOffset"), None, {}),
                derive_group_topic_map=True,
            )
        else:
            text = build_consumer_offset(ConsumerOffsets(table))
        atomic_write(
            self.root / "config" / "consumerOffset.json", text, fsync=self.config.fsync_configs
        )
        self.offsets_dirty = False

    def persist_topics(self) -> None:
        """``config/topics.json``."""
        self._versions["topics"] = self._versions.get("topics", 0) + 1
        names = [str(k) for k in chm_order(self.topics, TOPIC_CONFIG_TABLE_CAPACITY)]
        text = build_topics(
            TopicConfigs({n: self.topics[n] for n in names}, self._data_version("topics"))
        )
        atomic_write(self.root / "config" / "topics.json", text, fsync=self.config.fsync_configs)

    def persist_groups(self) -> None:
        """``config/subscriptionGroup.json``."""
        self._versions["subscriptionGroup"] = self._versions.get("subscriptionGroup", 0) + 1
        names = [str(k) for k in chm_order(self.groups, SUBSCRIPTION_GROUP_TABLE_CAPACITY)]
        text = build_subscription_groups(
            SubscriptionGroups(
                {n: self.groups[n] for n in names},
                self._data_version("subscriptionGroup"),
                {} if self.config.v5 else None,
            )
        )
        atomic_write(
            self.root / "config" / "subscriptionGroup.json", text, fsync=self.config.fsync_configs
        )

    # -- topics and groups --------------------------------------------------------------------

    def create_topic(
        self, topic: str, queue_nums: int | None = None, *, perm: int = 6, persist: bool = True
    ) -> TopicConfig:
        """Create (or return) a topic config as ``TopicConfigManager`` does; RefStoreError for
        a name the store cannot hold (:func:`~mqtool.formats.rules.store_name_refusal`)."""
        tc = self.topics.get(topic)
        if tc is None:
            check_store_name("topic", topic)
            n = queue_nums or self.config.default_queue_nums
            tc = TopicConfig(topic, n, n, perm, attributes={} if self.config.v5 else None)
            self.topics[topic] = tc
            if persist:
                self.persist_topics()
        return tc

    def create_group(
        self, group: str, *, retry_max_times: int | None = None, retry_queue_nums: int = 1,
        consume_orderly: bool = False,
    ) -> SubscriptionGroupConfig:
        """Create or update a consumer group (``subscriptionGroup.json``); RefStoreError for a
        name the store cannot hold."""
        cur = self.groups.get(group)
        if cur is None:
            check_store_name("group", group)
        fields: dict[str, Any]
        if cur is None:
            fields = default_subscription_group_fields(group)
            if not self.config.v5:  # 4.9.x SubscriptionGroupConfig has 9 bean fields
                for k in ("attributes", "groupRetryPolicy", "consumeTimeoutMinute",
                          "consumeMessageOrderly", "groupSysFlag"):
                    fields.pop(k, None)
            fields["retryMaxTimes"] = self.config.default_max_reconsume_times
        else:
            fields = dict(cur.fields)
        if retry_max_times is not None:
            fields["retryMaxTimes"] = retry_max_times
        fields["retryQueueNums"] = retry_queue_nums
        if self.config.v5 or "consumeMessageOrderly" in fields:
            fields["consumeMessageOrderly"] = consume_orderly
        cfg = SubscriptionGroupConfig(fields)
        if cur is None or dict(cur.fields) != fields:
            self.groups[group] = cfg
            self.persist_groups()
        return cfg

    def group(self, group: str) -> SubscriptionGroupConfig:
        """The group's config, created as the broker does (``autoCreateSubscriptionGroup``)."""
        cfg = self.groups.get(group)
        if cfg is None:  # autoCreateSubscriptionGroup=true
            cfg = self.create_group(group)
        return cfg


def check_store_name(kind: str, name: str) -> None:
    """RefStoreError unless the store can hold ``name`` (a ``topic`` or ``group``) as a
    directory or a config key: never a path outside the store, whatever the caller."""
    why = store_name_refusal(kind, name)
    if why is not None:
        raise RefStoreError(why)
