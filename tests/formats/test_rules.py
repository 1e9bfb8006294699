"""formats/rules.py: the broker's names and rules, and that they have no second home."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mqtool.formats import rules

ROOT = Path(__file__).resolve().parents[2]


def test_parse_delay_levels_default() -> None:
    table = rules.parse_delay_levels()
    assert len(table) == 18
    assert table[1] == 1000 and table[5] == 60_000 and table[18] == 2 * 3_600_000
    assert rules.parse_delay_levels("1s 2d") == {1: 1000, 2: 2 * 86_400_000}


@pytest.mark.parametrize("bad", ["", "1s  5s", "1x", "s", "1.5s", "1s 5"])
def test_parse_delay_levels_rejects_what_the_broker_rejects(bad: str) -> None:
    with pytest.raises(rules.BrokerRuleError):
        rules.parse_delay_levels(bad)


def test_fmt_delay_writes_the_level_string_back() -> None:
    text = rules.DEFAULT_MESSAGE_DELAY_LEVEL + " 1d 90s"
    table = rules.parse_delay_levels(text)
    assert " ".join(rules.fmt_delay(table[i]) for i in sorted(table)) == text
    assert rules.fmt_delay(1500) == "1500ms"
    assert rules.fmt_delay(3_600_000) == "1h"


def test_levels_and_queue_ids() -> None:
    assert rules.delay_level_to_queue_id(3) == 2
    assert rules.queue_id_to_delay_level(2) == 3


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        ("%RETRY%g", "retry"), ("%DLQ%g", "dlq"), ("SCHEDULE_TOPIC_XXXX", "schedule"),
        ("rmq_sys_wheel_timer", "timer"), ("RMQ_SYS_TRANS_HALF_TOPIC", "system"),
        ("rmq_sys_REVIVE_LOG_x", "system"), ("TBW102", "system"), ("OrderTopic", "normal"),
    ],
)
def test_topic_kind(topic: str, kind: str) -> None:
    assert rules.topic_kind(topic) == kind
    assert kind in rules.TOPIC_KINDS


def test_group_topics() -> None:
    assert rules.retry_topic("g") == "%RETRY%g" and rules.dlq_topic("g") == "%DLQ%g"
    assert rules.group_of("%RETRY%g") == "g" and rules.group_of("%DLQ%g") == "g"
    assert rules.group_of("T") is None
    assert rules.is_system_topic("%RETRY%g") and rules.is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert not rules.is_system_topic("OrderTopic")


def test_tags_code_and_ext_addresses() -> None:
    assert rules.tags_code_of(None) == 0 and rules.tags_code_of("") == 0
    assert rules.tags_code_of("TagA") == 2598919  # "TagA".hashCode() in Java
    assert rules.tags_code_of("zzzzzzzz") < 0  # Java int overflow kept
    assert rules.is_ext_addr(rules.MAX_ADDR) and not rules.is_ext_addr(rules.MAX_ADDR + 1)
    assert rules.undecorate(rules.decorate(1234)) == 1234
    assert rules.DEFAULT_MAX_RECONSUME_TIMES == 16


_RULE_LITERALS = re.compile(
    r'^\s*[A-Z_]+\s*=\s*"(%RETRY%|%DLQ%|SCHEDULE_TOPIC_XXXX|rmq_sys_wheel_timer|'
    r'RMQ_SYS_TRANS_HALF_TOPIC|1s 5s 10s[^"]*)"',
    re.M,
)
_RULE_DEFS = re.compile(
    r"^\s*def (_?fmt_delay|parse_delay_levels|tags_code_of|topic_kind|schedule_unit_delay|"
    r"_?java_split_space)\(", re.M)


def test_one_home_per_rule() -> None:
    """No module but formats/rules.py defines a broker name or a delay-level rule."""
    offenders = []
    for folder in ("formats", "mqtool", "spark"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "formats" / "rules.py":
                continue
            text = path.read_text(encoding="utf-8")
            for rx in (_RULE_LITERALS, _RULE_DEFS):
                offenders += [f"{path.relative_to(ROOT)}: {m.group(0).strip()}"
                              for m in rx.finditer(text)]
    assert offenders == []


@pytest.mark.parametrize(("topic", "remark"), [
    ("", "The specified topic is blank."),
    (" \t", "The specified topic is blank."),
    ("a b", rules.topic_refusal("a.b")),
    ("../../x", "The specified topic contains illegal characters, allowing only "
                "^[%|a-zA-Z0-9_-]+$"),
    ("\u00a0", rules.topic_refusal("a.b")),  # not Java whitespace: illegal, not blank
    ("T" * 128, "The specified topic is longer than topic max length."),
    ("T" * 127, None),
    ("%RETRY%g|x-y_1", None),
])
def test_topic_refusal_is_topic_validators(topic: str, remark: str | None) -> None:
    assert rules.topic_refusal(topic) == remark


def test_group_and_store_names() -> None:
    assert rules.group_refusal("GID_ok-1") is None and rules.group_refusal("g" * 255) is None
    assert rules.group_refusal("") == "the specified group is blank"
    too_long = "the specified group is longer than group max length 255."
    assert rules.group_refusal("g" * 256) == too_long
    assert rules.group_refusal("a/b") == ("the specified group[a/b] contains illegal characters, "
                                      "allowing only ^[%|a-zA-Z0-9_-]+$")
    assert rules.is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX")
    assert not rules.is_not_allowed_send_topic("TBW102")  # a system topic, but sendable
    for bad in ("", "..", "a/b", "T@G", "x" * 256, "\x00"):
        assert rules.store_name_refusal("topic", bad) is not None, bad
    assert rules.store_name_refusal("topic", "%RETRY%" + "g" * 248) is None


def test_dead_letter_origin() -> None:
    """The original topic of a record from its RETRY_TOPIC: a POP consumer's dead letter names
    its POP retry topic (v1 ``_`` or v2 ``+``), whose topic part is the original; any other
    record's RETRY_TOPIC is the original as it is."""
    from mqtool.formats.pop import dead_letter_origin

    assert dead_letter_origin("%DLQ%cg_pop", "%RETRY%cg_pop_PopTopic") == "PopTopic"
    assert dead_letter_origin("%DLQ%cg_pop", "%RETRY%cg_pop+PopTopic") == "PopTopic"
    assert dead_letter_origin("%DLQ%cg_orders", "TopicOrders") == "TopicOrders"
    assert dead_letter_origin("%DLQ%cg_orders", None) is None
    assert dead_letter_origin("%RETRY%cg_pop", "%RETRY%cg_pop_PopTopic") == \
        "%RETRY%cg_pop_PopTopic"  # not a dead letter: the property as it is
    assert dead_letter_origin("%DLQ%other", "%RETRY%cg_pop_PopTopic") == \
        "%RETRY%cg_pop_PopTopic"  # another group's retry topic


def test_delay_written_takes_whole_seconds_up_to_ten_years() -> None:
    delay_written = rules.delay_written
    levels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h 3650d"
    for delay in rules.parse_delay_levels(levels).values():
        assert delay_written(delay)
    assert delay_written(1000)  # computeDeliverTimestamp of a level outside the table
    assert delay_written(-1000)  # "-1s" parses (Long.parseLong)
    for damaged in (1, 999, 1500, 7_143_517_753_971_253_763, 3651 * 86_400_000):
        assert not delay_written(damaged)
