"""Resend into a copy of the broker's store, then `mqtool trace` of a resent
message shows original -> retries -> DLQ -> resent copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from conftest import store_dir
from mqtool.cli import app
from mqtool.dlq.outgoing import RESEND_DLQ_MSG_ID
from mqtool.store import Store
from mqtool.trace import trace_id

JOURNEY = "4.9.7/journey"
runner = CliRunner()


def test_trace_shows_the_resend_as_the_last_hop(tmp_path: Path) -> None:
    target = tmp_path / "journey"
    shutil.copytree(store_dir(JOURNEY), target)
    res = runner.invoke(app, ["dlq", "resend", str(store_dir(JOURNEY)), "-g", "cg_journey",
                              "--target", str(target), "--json"])
    assert res.exit_code == 0, res.output
    outcomes = json.loads(res.stdout)["outcomes"]
    assert len(outcomes) == 4
    with Store.open(target) as st:
        for o in outcomes:
            t = trace_id(st, o["uniqKey"])
            kinds = [h.kind for h in t.hops]
            assert kinds[0] == "original" and kinds[-2:] == ["dlq", "resend"], kinds
            dlq, copy = t.hops[-2], t.hops[-1]
            assert dlq.offset_msg_id == o["dlqMsgId"]
            assert copy.offset_msg_id == o["msgId"]
            assert copy.message.properties[RESEND_DLQ_MSG_ID] == o["dlqMsgId"]
            assert copy.topic == "%RETRY%cg_journey" and copy.reconsume_times == 0
            if o["dlqMsgId"] != "C0A8010A00002A9F0000000000001342":  # not the delayLevel -1 one
                assert kinds.count("retry") == 3
            # the resent copy names the same journey when traced by its own offsetMsgId
            again = trace_id(st, o["msgId"])
            assert [h.offset_msg_id for h in again.hops] == [h.offset_msg_id for h in t.hops]
