"""``config/delayOffset.json``: ``ScheduleMessageService``'s delay-level progress."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.config.fastjson import dumps_fastjson
from mqtool.formats.config.fields import (
    DataVersion,
    extra_fields,
    int_table,
    load_object,
    with_extra,
)


@dataclass(frozen=True, slots=True)
class DelayOffsetTable:
    """``delayOffset.json`` (``DelayOffsetSerializeWrapper``).

    ``offset_table``: delay level (1-based) -> next consume-queue offset of
    ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``. ``data_version`` present from 5.x on.
    """

    offset_table: Mapping[int, int]
    data_version: DataVersion | None = None
    extra: Mapping[str, Any] | None = field(default=None, hash=False)  # a newer broker's fields


def parse_delay_offset(text: str, *, file: str | None = None) -> DelayOffsetTable:
    """Parse ``delayOffset.json`` text (fields beyond the known ones kept in ``extra``)."""
    obj = load_object(text, file, "delayOffset.json")
    dv = obj.get("dataVersion")
    return DelayOffsetTable(
        offset_table=int_table(obj.get("offsetTable", {}), file, "offsetTable"),
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        extra=extra_fields(obj, ("offsetTable", "dataVersion")),
    )


def build_delay_offset(
    table: Mapping[int, int] | DelayOffsetTable, data_version: DataVersion | None = None
) -> str:
    """``delayOffset.json`` text as RocketMQ writes it (4.9.7 without, 5.x with ``data_version``).

    Levels are written ascending (the broker's ``ConcurrentHashMap(32)`` iterates small ints in
    order).
    """
    extra = None
    if isinstance(table, DelayOffsetTable):
        data_version = table.data_version if data_version is None else data_version
        extra = table.extra
        table = table.offset_table
    obj: dict[str, Any] = {}
    if data_version is not None:
        obj["dataVersion"] = data_version.to_json_obj()
    obj["offsetTable"] = {int(k): int(table[k]) for k in sorted(table)}
    return dumps_fastjson(with_extra(obj, extra), pretty=True)
