"""``messages --topic %LMQ%<name>``: an LMQ's messages are records of another topic the broker
dispatched to it (``INNER_MULTI_DISPATCH``); they are the ones its consume-queue units name, in
the real 5.3.3 LMQ store (the manifest's units, as the broker's reader gave them)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import manifest_jsonl, store_dir
from mqtool.cli import app

NAME = "5.3.3/lmq"
LMQS = [q for q in manifest_jsonl(NAME, "queues.jsonl") if q["topic"].startswith("%LMQ%")]


def test_the_store_has_lmqs() -> None:
    assert len(LMQS) == 3


@pytest.mark.parametrize("queue", LMQS, ids=lambda q: q["topic"])
def test_messages_of_an_lmq_are_the_records_its_units_name(queue: dict) -> None:
    res = CliRunner().invoke(app, ["messages", str(store_dir(NAME)), "--topic", queue["topic"],
                                   "--jsonl"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [(r["commitLogOffset"], r["storeSize"]) for r in rows] == \
        [(phy, size) for phy, size, _tags in queue["units"]]
    assert {r["topic"] for r in rows} == {"LmqParent"}  # stored under their own topic
