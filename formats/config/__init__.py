"""Broker config files (``store/config/*.json``): fastjson's dialect, one model per file,
and the one loader with the broker's ``.bak`` fallback.

* :mod:`.fastjson` - the fastjson 1.x text dialect (parser and byte-exact writer);
* :mod:`.delay_offset`, :mod:`.consumer_offset`, :mod:`.topics`, :mod:`.subscription_group` -
  one module per config file (typed model, ``parse_*`` and ``build_*``);
* :mod:`.fields` - ``DataVersion`` and the field readers the models share;
* :mod:`.load` - ``ConfigManager#load`` / ``loadBak``: :func:`load_config`.

Java map orders (``chm_order``) live in :mod:`mqtool.formats.javacompat`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqtool.formats.config.consumer_offset import (
        CONSUMER_OFFSET_TABLE_CAPACITY,
        TOPIC_GROUP_SEPARATOR,
        ConsumerOffsets,
        build_consumer_offset,
        parse_consumer_offset,
    )
    from mqtool.formats.config.delay_offset import (
        DelayOffsetTable,
        build_delay_offset,
        parse_delay_offset,
    )
    from mqtool.formats.config.fastjson import (
        FastjsonDict,
        FastjsonList,
        dumps_fastjson,
        java_double_to_string,
        java_set,
        loads_fastjson,
    )
    from mqtool.formats.config.fields import (
        DataVersion,
    )
    from mqtool.formats.config.load import (
        CONFIG_PARSERS,
        ConfigLoad,
        load_config,
    )
    from mqtool.formats.config.subscription_group import (
        SUBSCRIPTION_GROUP_TABLE_CAPACITY,
        SubscriptionGroupConfig,
        SubscriptionGroups,
        build_subscription_groups,
        default_subscription_group_fields,
        parse_subscription_groups,
    )
    from mqtool.formats.config.topics import (
        TOPIC_CONFIG_TABLE_CAPACITY,
        TopicConfig,
        TopicConfigs,
        build_topics,
        parse_topics,
    )
    from mqtool.formats.javacompat import chm_order

_HOMES = {
    "CONFIG_PARSERS": "mqtool.formats.config.load",
    "CONSUMER_OFFSET_TABLE_CAPACITY": "mqtool.formats.config.consumer_offset",
    "ConfigLoad": "mqtool.formats.config.load",
    "ConsumerOffsets": "mqtool.formats.config.consumer_offset",
    "DataVersion": "mqtool.formats.config.fields",
    "DelayOffsetTable": "mqtool.formats.config.delay_offset",
    "FastjsonDict": "mqtool.formats.config.fastjson",
    "FastjsonList": "mqtool.formats.config.fastjson",
    "SUBSCRIPTION_GROUP_TABLE_CAPACITY": "mqtool.formats.config.subscription_group",
    "SubscriptionGroupConfig": "mqtool.formats.config.subscription_group",
    "SubscriptionGroups": "mqtool.formats.config.subscription_group",
    "TOPIC_CONFIG_TABLE_CAPACITY": "mqtool.formats.config.topics",
    "TOPIC_GROUP_SEPARATOR": "mqtool.formats.config.consumer_offset",
    "TopicConfig": "mqtool.formats.config.topics",
    "TopicConfigs": "mqtool.formats.config.topics",
    "build_consumer_offset": "mqtool.formats.config.consumer_offset",
    "build_delay_offset": "mqtool.formats.config.delay_offset",
    "build_subscription_groups": "mqtool.formats.config.subscription_group",
    "build_topics": "mqtool.formats.config.topics",
    "chm_order": "mqtool.formats.javacompat",
    "default_subscription_group_fields": "mqtool.formats.config.subscription_group",
    "dumps_fastjson": "mqtool.formats.config.fastjson",
    "java_double_to_string": "mqtool.formats.config.fastjson",
    "java_set": "mqtool.formats.config.fastjson",
    "load_config": "mqtool.formats.config.load",
    "loads_fastjson": "mqtool.formats.config.fastjson",
    "parse_consumer_offset": "mqtool.formats.config.consumer_offset",
    "parse_delay_offset": "mqtool.formats.config.delay_offset",
    "parse_subscription_groups": "mqtool.formats.config.subscription_group",
    "parse_topics": "mqtool.formats.config.topics",
}
"""Where each name of ``__all__`` is defined (imported on first use, :func:`__getattr__`)."""

__all__ = [
    "CONFIG_PARSERS",
    "CONSUMER_OFFSET_TABLE_CAPACITY",
    "SUBSCRIPTION_GROUP_TABLE_CAPACITY",
    "TOPIC_CONFIG_TABLE_CAPACITY",
    "TOPIC_GROUP_SEPARATOR",
    "ConfigLoad",
    "ConsumerOffsets",
    "DataVersion",
    "DelayOffsetTable",
    "FastjsonDict",
    "FastjsonList",
    "SubscriptionGroupConfig",
    "SubscriptionGroups",
    "TopicConfig",
    "TopicConfigs",
    "build_consumer_offset",
    "build_delay_offset",
    "build_subscription_groups",
    "build_topics",
    "chm_order",
    "default_subscription_group_fields",
    "dumps_fastjson",
    "java_double_to_string",
    "java_set",
    "load_config",
    "loads_fastjson",
    "parse_consumer_offset",
    "parse_delay_offset",
    "parse_subscription_groups",
    "parse_topics",
]


def __getattr__(name: str) -> Any:
    """The names of ``__all__``, each imported from its module when first asked for: a
    command that reads one config file imports that file's model only."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
