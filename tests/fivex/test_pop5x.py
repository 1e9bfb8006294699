"""POP in the real 5.3.3 store: both retry-topic forms, the revive topic's checkpoints and acks,
and dead letters whose original topic is the POP retry topic's topic part."""

from __future__ import annotations

import base64
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


def _revive_bodies() -> tuple[dict[tuple[str, str, int, int, int], dict[str, object]],
                              dict[tuple[str, str, int, int, int], int]]:
    """From the manifest: every checkpoint (group, topic, queue, startOffset, popTime) -> body
    and every acked (group, topic, queue, offset, popTime) -> first ack record's offset."""
    cks: dict[tuple[str, str, int, int, int], dict[str, object]] = {}
    acks: dict[tuple[str, str, int, int, int], int] = {}
    for r in manifest_jsonl(NAME, "commitlog.jsonl"):
        if r["kind"] != "msg":
            continue
        p = r["properties"]
        if "REVIVE_LOG" not in str(r["topic"]) + p.get("REAL_TOPIC", ""):
            continue
        b = json.loads(base64.b64decode(r["bodyBase64"]))
        if p["TAGS"] == "ck":
            cks.setdefault((b["c"], b["t"], b["q"], b["so"], b["pt"]), b)
        else:
            acks.setdefault((b["c"], b["t"], b["q"], b["ao"], b["pt"]), r["phyOffset"])
    return cks, acks


def _scenario_fates() -> dict[str, list[str]]:
    """What the scenario's clients did with each key (scenario-log.txt, written by the
    fixture script as it drove the real broker)."""
    fates: dict[str, list[str]] = {}
    log = (store_dir(NAME).parent / "scenario-log.txt").read_text(encoding="utf-8")
    for ln in log.splitlines():
        parts = ln.split()
        for word in ("acked", "dead-lettered", "change", "left", "held"):
            if word in parts[1:3] or (word == "held" and "held" in parts):
                key = next((p for p in parts if p.startswith("PopTopic")), None)
                if key is not None:
                    fates.setdefault(key, []).append(word)
    return fates


def test_trace_shows_each_pop_checkout_and_its_end() -> None:
    """Every copy of every POP message: its checkouts are the manifest's checkpoints that hold
    its queue offset, each acked (an ack with that popTime), changed (acked and checked out
    again), revived (a later copy in the POP retry topic) or in flight."""
    cks, acks = _revive_bodies()
    msgs = [r for r in manifest_jsonl(NAME, "commitlog.jsonl") if r["kind"] == "msg"]
    fates = _scenario_fates()
    for key in sorted(fates):
        res = CliRunner().invoke(app, ["trace", str(store_dir(NAME)), "--key", key, "--json"])
        assert res.exit_code == 0, res.output
        (tr,) = json.loads(res.stdout)["traces"]
        copies = [r for r in msgs if r["properties"].get("KEYS") == key
                  and not str(r["topic"]).startswith(("%DLQ%", "rmq_sys"))]
        hops = {h["commitLogOffset"]: h for h in tr["hops"]}
        states = []
        for i, r in enumerate(copies):
            held = [(k, b) for k, b in sorted(cks.items(), key=lambda kv: kv[0][4])
                    if k[1:3] == (r["topic"], r["queueId"])
                    and r["queueOffset"] in [k[3] + d for d in b["d"]]]
            got = hops[r["phyOffset"]]["popCheckouts"]
            assert [c["popTime"] for c in got] == [k[4] for k, _ in held], key
            for (k, b), c in zip(held, got, strict=True):
                assert c["invisibleUntil"] == k[4] + b["it"]
                ack = acks.get((k[0], k[1], k[2], r["queueOffset"], k[4]))
                assert c["ackRecord"] == ack
                later = any(k2[1:3] == k[1:3] and k2[4] > k[4] for k2, b2 in held)
                if ack is not None:
                    assert c["state"] == ("changed" if later else "acked"), key
                elif copies[i + 1:]:
                    assert c["state"] == "revived", key
                    assert c["at"] == copies[i + 1]["storeTimestamp"]
                else:
                    assert c["state"] == "in-flight", key
                states.append(c["state"])
        fate = fates[key]
        if "held" in fate:
            assert states == ["in-flight"] and tr["verdictKind"] == "in-flight", key
        if "left" in fate:
            assert states[0] == "revived", key
        if "change" in fate:
            assert states[0] == "changed", key
        if "acked" in fate or "dead-lettered" in fate:
            assert states[-1] == "acked", key
        if "dead-lettered" in fate:
            assert tr["verdictKind"] == "dead-lettered"


def test_trace_html_lists_the_pop_checkouts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "journey.html"
    res = CliRunner().invoke(app, ["trace", str(store_dir(NAME)), "--key", "PopTopic-2",
                                   "--html", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    assert "POP checkouts" in page and "state-changed" in page and "state-revived" in page
    assert "POP checkout by cg_pop" in res.stdout


def test_dlq_resend_of_pop_dead_letters_to_retry_and_original(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--to retry`` puts a POP group's dead letters into its POP retry topic (the one their
    RETRY_TOPIC names: ``%RETRY%<group>_<topic>``, with enableRetryTopicV2
    ``%RETRY%<group>+<topic>``), ``--to original`` into ``<topic>``, in a store target."""
    from mqtool.refstore.engine import ManualClock, RefStore, StoreConfig

    dead = _dead_letters()
    for to in ("retry", "original"):
        target = tmp_path / to
        RefStore.open(target, StoreConfig(commitlog_file_size=1 << 20), clock=ManualClock()).close()
        for group in ("cg_pop", "cg_pop2"):
            res = CliRunner().invoke(app, ["dlq", "resend", str(store_dir(NAME)), "-g", group,
                                           "--target", str(target), "--to", to, "--json"])
            assert res.exit_code == 0, res.output
            rep = json.loads(res.stdout)
            mine = [r for r in dead if r["topic"] == f"%DLQ%{group}"]
            assert rep["sent"] == len(mine) and rep["failed"] == 0
        with Store.open(target) as st:
            got = sorted((m.topic, m.uniq_key) for m in st.messages())
            assert not st.findings
        want = []
        for r in dead:
            rt = str(r["properties"]["RETRY_TOPIC"])  # type: ignore[index]
            group = str(r["topic"])[len("%DLQ%"):]
            sep = rt[len("%RETRY%") + len(group)]
            assert rt.startswith(f"%RETRY%{group}") and sep in "_+"
            topic = rt if to == "retry" else rt[len("%RETRY%") + len(group) + 1:]
            want.append((topic, r["uniqKey"]))
        assert got == sorted(want)  # type: ignore[arg-type]
    assert {t for t, _ in want} == {"PopTopic", "PopTopic2"}


def test_inspect_shows_pop_checkouts_and_the_timer_backlog() -> None:
    res = CliRunner().invoke(app, ["inspect", str(store_dir(NAME)), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    text = CliRunner().invoke(app, ["inspect", str(store_dir(NAME))])
    assert text.exit_code == 0, text.output
    assert "POP checkouts" in text.stdout
    tb = doc["timerBacklog"]
    assert f"timer backlog: {tb['waiting']} waiting" in text.stdout
    # the scenario held 5 messages for an hour: their checkpoints wait in the timer
    assert sum(r["inFlight"] for r in doc["popInFlight"]) == 5
