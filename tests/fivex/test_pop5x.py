"""POP in the real 5.3.3 store: both retry-topic forms, the revive topic's checkpoints and acks,
and dead letters whose original topic is the POP retry topic's topic part."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.formats.pop import PopAck, PopCheckPoint
from mqtool.integrity.pop import parse_record, revive_records
from mqtool.store import Store

NAME = "5.3.3/pop"


def test_both_retry_topic_forms_were_written() -> None:
    topics = {r["topic"] for r in manifest_jsonl(NAME, "commitlog.jsonl") if r["kind"] == "msg"}
    assert "%RETRY%cg_pop_PopTopic" in topics  # V1 (enableRetryTopicV2=false)
    assert "%RETRY%cg_pop2+PopTopic2" in topics  # V2 after the restart
    assert {"%DLQ%cg_pop", "%DLQ%cg_pop2"} <= topics


def test_every_revive_record_parses() -> None:
    with Store.open(store_dir(NAME)) as st:
        got = [parse_record(st, m) for m in revive_records(st)]
    cks = [g for g in got if isinstance(g, PopCheckPoint)]
    acks = [g for g in got if isinstance(g, PopAck)]
    assert cks and acks
    assert {c.group for c in cks} == {"cg_pop", "cg_pop2"}
    # the checkpoints of the messages held at the stop: invisible for an hour
    assert any(c.invisible_time == 3_600_000 for c in cks)


def test_dlq_original_topic_of_pop_dead_letters() -> None:
    dead = [r for r in manifest_jsonl(NAME, "commitlog.jsonl")
            if r["kind"] == "msg" and str(r["topic"]).startswith("%DLQ%")]
    assert {r["properties"]["RETRY_TOPIC"] for r in dead} == \
        {"%RETRY%cg_pop_PopTopic", "%RETRY%cg_pop2+PopTopic2"}
    res = CliRunner().invoke(app, ["dlq", "list", str(store_dir(NAME)), "--json"])
    assert res.exit_code == 0, res.output
    groups = {g["group"]: g for g in json.loads(res.stdout)}
    assert groups["cg_pop"]["originalTopics"] == {"PopTopic": 4}
    assert groups["cg_pop2"]["originalTopics"] == {"PopTopic2": 2}


def _dead_letters() -> list[dict[str, object]]:
    return [r for r in manifest_jsonl(NAME, "commitlog.jsonl")
            if r["kind"] == "msg" and str(r["topic"]).startswith("%DLQ%")]


def test_trace_of_a_pop_dead_letter_names_the_group() -> None:
    """Every hop in a POP retry topic ``%RETRY%<group>_<topic>`` (or ``+``) names the group the
    DLQ topic ``%DLQ%<group>`` names, never ``<group>_<topic>``."""
    for dead in _dead_letters():
        group = str(dead["topic"])[len("%DLQ%"):]
        uniq = str(dead["uniqKey"])
        retry_copies = [r for r in manifest_jsonl(NAME, "commitlog.jsonl")
                        if r["kind"] == "msg" and r.get("uniqKey") == uniq
                        and str(r["topic"]).startswith("%RETRY%")]
        res = CliRunner().invoke(app, ["trace", str(store_dir(NAME)), uniq, "--json"])
        assert res.exit_code == 0, res.output
        tr = json.loads(res.stdout)
        assert tr["dlqGroup"] == group
        retries = [h for h in tr["hops"] if h["kind"] == "pop-retry"]
        assert [h["commitLogOffset"] for h in retries] == \
            [r["phyOffset"] for r in retry_copies]
        assert {h["group"] for h in retries} == {group}
        assert all(f"group {group}_" not in h["stateDetail"] for h in tr["hops"])
