"""`mqtool dlq list/show/export` against the real journey store (RocketMQ 4.9.7's own bytes)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app
from mqtool.dlq import CSV_COLUMNS, DlqSelection, export_dict, list_groups, select_dlq
from mqtool.formats.commitlog import HostPort
from mqtool.store import Store

JOURNEY = "4.9.7/journey"
runner = CliRunner()


def _manifest_dlq() -> list[dict[str, Any]]:
    return [r for r in manifest_jsonl(JOURNEY, "commitlog.jsonl")
            if r.get("kind") == "msg" and r["topic"] == "%DLQ%cg_journey"]


def test_list_agrees_with_manifest() -> None:
    want = _manifest_dlq()
    assert len(want) == 4
    with Store.open(store_dir(JOURNEY)) as st:
        groups = list_groups(st)
    assert [g.to_dict() for g in groups] == [{
        "group": "cg_journey",
        "dlqTopic": "%DLQ%cg_journey",
        "count": 4,
        "firstStoreTimestamp": min(r["storeTimestamp"] for r in want),
        "lastStoreTimestamp": max(r["storeTimestamp"] for r in want),
        "originalTopics": {"JourneyTopic": 4},
        "resent": 0,
    }]
    res = runner.invoke(app, ["dlq", "list", str(store_dir(JOURNEY)), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [g.to_dict() for g in groups]


def test_export_jsonl_fields_match_manifest() -> None:
    want = _manifest_dlq()
    res = runner.invoke(app, ["dlq", "export", str(store_dir(JOURNEY)), "--group", "cg_journey",
                              "--format", "jsonl", "--body", "base64"])
    assert res.exit_code == 0, res.output
    got = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["commitLogOffset"] == w["phyOffset"]
        assert g["offsetMsgId"] == w["offsetMsgId"]
        assert g["uniqKey"] == w["uniqKey"]
        assert g["originalTopic"] == "JourneyTopic" == w["properties"]["RETRY_TOPIC"]
        assert g["originMsgId"] == w["properties"]["ORIGIN_MESSAGE_ID"]
        assert g["reconsumeTimes"] == w["reconsumeTimes"]
        for f in ("bornHost", "storeHost"):  # Java spells IPv6 uncompressed
            assert HostPort.parse(g[f]) == HostPort.parse(w[f])
        assert g["bornTimestamp"] == w["bornTimestamp"]
        assert g["storeTimestamp"] == w["storeTimestamp"]
        assert g["properties"] == w["properties"]
        assert g["bodyCRC"] == w["bodyCRC"]
        assert g["body"] == w["bodyBase64"]
    # the original msgIds name the first copies, in JourneyTopic
    with Store.open(store_dir(JOURNEY)) as st:
        for g in got:
            first = st.find_by_offset_msg_id(g["originMsgId"])
            assert first is not None and first.topic == "JourneyTopic"
            assert first.uniq_key == g["uniqKey"] and first.reconsume_times == 0
        # the CLI's JSON is the library's result
        lib = [export_dict(m, "base64") for m in select_dlq(st, DlqSelection("cg_journey"))]
    assert got == lib


def test_export_csv_has_dashboard_columns() -> None:
    res = runner.invoke(app, ["dlq", "export", str(store_dir(JOURNEY)), "-g", "cg_journey",
                              "--format", "csv"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert tuple(rows[0]) == CSV_COLUMNS
    for col in ("topic", "msgId", "bornHost", "bornTimestamp", "storeTimestamp",
                "reconsumeTimes", "properties", "body", "bodyCRC"):
        assert col in CSV_COLUMNS
    want = _manifest_dlq()
    assert [r["msgId"] for r in rows] == [w["uniqKey"] for w in want]
    assert [int(r["bodyCRC"]) for r in rows] == [w["bodyCRC"] for w in want]
    assert [json.loads(r["properties"]) for r in rows] == [w["properties"] for w in want]
    assert rows[0]["body"] == "journey body for j-dlq-0 / DLQ_DIRECT"


def test_selection_filters() -> None:
    want = _manifest_dlq()
    with Store.open(store_dir(JOURNEY)) as st:

        def sel(**kw: Any) -> list[int]:
            return [m.physical_offset for m in select_dlq(st, DlqSelection("cg_journey", **kw))]

        assert sel() == [w["phyOffset"] for w in want]
        assert sel(limit=2) == [w["phyOffset"] for w in want[:2]]
        assert sel(topic="JourneyTopic") == sel()
        assert sel(topic="Other") == []
        assert sel(key="j-always-1") == [want[3]["phyOffset"]]
        w = want[2]
        for ident in (w["offsetMsgId"], w["uniqKey"].lower(), w["properties"]["ORIGIN_MESSAGE_ID"]):
            assert sel(msg_id=ident) == [w["phyOffset"]]
        assert sel(since=want[1]["storeTimestamp"], until=want[3]["storeTimestamp"]) == [
            want[1]["phyOffset"], want[2]["phyOffset"]]
        assert list(select_dlq(st, DlqSelection("nobody"))) == []


def test_show_human_and_json() -> None:
    root = str(store_dir(JOURNEY))
    res = runner.invoke(app, ["dlq", "show", root, "-g", "cg_journey", "--key", "j-dlq-0"])
    assert res.exit_code == 0, res.output
    assert "JourneyTopic" in res.stdout and "C0A8010A00002A9F0000000000000A47" in res.stdout
    assert "1 DLQ records of %DLQ%cg_journey" in res.stdout
    res = runner.invoke(app, ["dlq", "show", root, "-g", "cg_journey", "--json", "--limit", "1"])
    assert res.exit_code == 0
    (one,) = json.loads(res.stdout)
    assert one["originMsgId"] == "C0A8010A00002A9F0000000000000A47"


def test_every_dlq_command_has_help_with_example() -> None:
    for cmd in ("list", "show", "export", "resend"):
        res = runner.invoke(app, ["dlq", cmd, "--help"])
        assert res.exit_code == 0
        assert "Example: mqtool dlq " + cmd in " ".join(res.stdout.split())
    res = runner.invoke(app, ["dlq", "resend", "--help"], terminal_width=200)
    assert "EVERY" in res.stdout  # --to original reaches every subscribed group
