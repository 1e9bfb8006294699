"""``config/consumerOffset.json``: ``ConsumerOffsetManager``'s offsets per ``topic@group``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.config.fastjson import (
    dumps_fastjson,
    java_set,
)
from mqtool.formats.config.fields import (
    DataVersion,
    extra_fields,
    int_table,
    load_object,
    with_extra,
)
from mqtool.formats.errors import FormatError
from mqtool.formats.javacompat import hashmap_order

# ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR: offsetTable keys are "<topic>@<group>".
TOPIC_GROUP_SEPARATOR = "@"
CONSUMER_OFFSET_TABLE_CAPACITY = 512  # ConsumerOffsetManager.offsetTable (ConcurrentHashMap)

@dataclass(frozen=True, slots=True)
class ConsumerOffsets:
    """``consumerOffset.json`` (``ConsumerOffsetManager``).

    ``offset_table``: ``"<topic>@<group>"`` (also ``"<topic>@<group>@broadcast"``-style extra
    keys) -> {queueId: next offset}. ``group_topic_map`` (5.x) is the derived getter fastjson
    serializes: group -> topics. ``lmq_offset_table`` (5.x) kept as read.
    """

    offset_table: Mapping[str, Mapping[int, int]]
    data_version: DataVersion | None = None
    group_topic_map: Mapping[str, Sequence[str]] | None = None
    lmq_offset_table: Mapping[Any, Any] | None = None
    extra: Mapping[str, Any] | None = field(default=None, hash=False)  # a newer broker's fields

    def topic_group(self, key: str) -> tuple[str, str]:
        """Split an offsetTable key into (topic, group)."""
        return split_offset_key(key)


def split_offset_key(key: str) -> tuple[str, str]:
    """An offsetTable key ``"<topic>@<group>"`` as (topic, group)."""
    topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
    return topic, group


def parse_consumer_offset(text: str, *, file: str | None = None) -> ConsumerOffsets:
    """Parse ``consumerOffset.json`` text."""
    obj = load_object(text, file, "consumerOffset.json")
    raw = obj.get("offsetTable", {})
    if not isinstance(raw, Mapping):
        raise FormatError(file, None, "offsetTable: expected an object")
    offsets: dict[str, Mapping[int, int]] = {}
    for key, qmap in raw.items():
        if not isinstance(key, str):
            raise FormatError(
                file, None, f'offsetTable: expected "topic@group" keys, found {key!r}'
            )
        offsets[key] = int_table(qmap, file, f"offsetTable[{key!r}]")
    gtm = obj.get("groupTopicMap")
    group_topic_map: dict[str, Sequence[str]] | None = None
    if gtm is not None:
        if not isinstance(gtm, Mapping) or not all(
            isinstance(g, str) and isinstance(ts, list) and all(isinstance(t, str) for t in ts)
            for g, ts in gtm.items()
        ):
            raise FormatError(file, None, "groupTopicMap: expected {group: [topics]}")
        group_topic_map = {g: list(ts) for g, ts in gtm.items()}
    lmq = obj.get("lmqOffsetTable")
    if lmq is not None and not isinstance(lmq, Mapping):
        raise FormatError(file, None, "lmqOffsetTable: expected an object")
    dv = obj.get("dataVersion")
    return ConsumerOffsets(
        offset_table=offsets,
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        group_topic_map=group_topic_map,
        lmq_offset_table=None if lmq is None else dict(lmq),
        extra=extra_fields(obj, ("offsetTable", "dataVersion", "groupTopicMap",
                                 "lmqOffsetTable")),
    )


def _derive_group_topic_map(keys: Iterable[str]) -> dict[str, list[str]]:
    # ConsumerOffsetManager#getGroupTopicMap: only keys that split into exactly two parts;
    # HashMap<String, Set<String>>(128) of HashSet(8): both iterate in hash-bucket order.
    groups: dict[str, list[str]] = {}
    for key in keys:
        parts = key.split(TOPIC_GROUP_SEPARATOR)
        if len(parts) == 2:
            topics = groups.setdefault(parts[1], [])
            if parts[0] not in topics:
                topics.append(parts[0])
    result: dict[str, list[str]] = {}
    for g in hashmap_order(groups, 128):
        result[g] = hashmap_order(groups[g], 8)
    return result


def build_consumer_offset(offsets: ConsumerOffsets, *, derive_group_topic_map: bool = False) -> str:
    """``consumerOffset.json`` text in the broker's shape.

    Fields present are those set on ``offsets`` (``None`` = absent, as in 4.x files). With
    ``derive_group_topic_map`` the ``groupTopicMap`` is computed like the broker's getter.
    The offsetTable is written in the given key order (use :func:`chm_order` with
    :data:`CONSUMER_OFFSET_TABLE_CAPACITY` for a fresh table); queue ids ascending.
    """
    obj: dict[str, Any] = {}
    if offsets.data_version is not None:
        obj["dataVersion"] = offsets.data_version.to_json_obj()
    gtm: Mapping[str, Sequence[str]] | None = offsets.group_topic_map
    if derive_group_topic_map:
        gtm = _derive_group_topic_map(offsets.offset_table)
    if gtm is not None:
        obj["groupTopicMap"] = {g: java_set(ts) for g, ts in gtm.items()}
    if offsets.lmq_offset_table is not None:
        obj["lmqOffsetTable"] = dict(offsets.lmq_offset_table)
    obj["offsetTable"] = {
        key: {int(q): int(qmap[q]) for q in sorted(qmap)}
        for key, qmap in offsets.offset_table.items()
    }
    return dumps_fastjson(with_extra(obj, offsets.extra), pretty=True)
