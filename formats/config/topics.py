"""``config/topics.json``: ``TopicConfigManager``'s topic table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.config.fastjson import dumps_fastjson
from mqtool.formats.config.fields import DataVersion, is_int, load_object
from mqtool.formats.errors import FormatError

TOPIC_CONFIG_TABLE_CAPACITY = 1024  # TopicConfigManager.topicConfigTable (ConcurrentHashMap)

_TOPIC_FIELDS = {
    "attributes": "attributes",
    "order": "order",
    "perm": "perm",
    "readQueueNums": "read_queue_nums",
    "topicFilterType": "topic_filter_type",
    "topicName": "topic_name",
    "topicSysFlag": "topic_sys_flag",
    "writeQueueNums": "write_queue_nums",
}


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """``org.apache.rocketmq.common.TopicConfig`` as serialized in ``topics.json``.

    ``perm``: PermName bits (2 write, 4 read, 1 inherit). ``attributes`` (5.x; ``None`` = field
    absent, 4.x) e.g. ``{"+message.type": "NORMAL"}``. ``extra``: any other serialized fields.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        """Bean fields, alphabetically sorted as fastjson writes them."""
        obj: dict[str, Any] = dict(self.extra)
        for json_name, attr in _TOPIC_FIELDS.items():
            value = getattr(self, attr)
            if value is not None:
                obj[json_name] = dict(value) if json_name == "attributes" else value
        return {k: obj[k] for k in sorted(obj)}

    @classmethod
    def from_json_obj(cls, obj: Any, *, file: str | None = None) -> TopicConfig:
        """Read one ``topicConfigTable`` value."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("topicName"), str):
            raise FormatError(
                file, None, f"TopicConfig: expected an object with topicName: {obj!r}"
            )
        kwargs: dict[str, Any] = {}
        for json_name, attr in _TOPIC_FIELDS.items():
            if json_name in obj:
                kwargs[attr] = obj[json_name]
        if "attributes" in kwargs and not isinstance(kwargs["attributes"], Mapping):
            raise FormatError(file, None, "TopicConfig.attributes: expected an object")
        for name in ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag"):
            if name in kwargs and not is_int(kwargs[name]):
                raise FormatError(file, None, f"TopicConfig.{name}: expected int")
        extra = {k: v for k, v in obj.items() if k not in _TOPIC_FIELDS}
        return cls(**kwargs, extra=extra)


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    """``topics.json`` (``TopicConfigSerializeWrapper``): topic name -> :class:`TopicConfig`."""

    topic_config_table: Mapping[str, TopicConfig]
    data_version: DataVersion | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_topics(text: str, *, file: str | None = None) -> TopicConfigs:
    """Parse ``topics.json`` text."""
    obj = load_object(text, file, "topics.json")
    table = obj.get("topicConfigTable", {})
    if not isinstance(table, Mapping):
        raise FormatError(file, None, "topicConfigTable: expected an object")
    dv = obj.get("dataVersion")
    return TopicConfigs(
        topic_config_table={
            str(k): TopicConfig.from_json_obj(v, file=file) for k, v in table.items()
        },
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        extra={k: v for k, v in obj.items() if k not in ("topicConfigTable", "dataVersion")},
    )


def build_topics(topics: TopicConfigs) -> str:
    """``topics.json`` text; topics in the given order (see :func:`chm_order`)."""
    obj: dict[str, Any] = dict(topics.extra)
    if topics.data_version is not None:
        obj["dataVersion"] = topics.data_version.to_json_obj()
    obj["topicConfigTable"] = {
        name: tc.to_json_obj() for name, tc in topics.topic_config_table.items()
    }
    return dumps_fastjson({k: obj[k] for k in sorted(obj)}, pretty=True)
