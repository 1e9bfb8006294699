"""Broken config files degrade, never abort: every read command, every config file.

On a private copy of the journey store, each config file the broker loads (delayOffset.json,
consumerOffset.json, topics.json, subscriptionGroup.json) is broken in the ways a crash or a
disk leaves it: emptied with a good ``.bak`` (the broker loads the ``.bak``), truncated JSON
without a ``.bak``, not UTF-8, a directory. Then every read command runs in-process:

* no traceback, exit 0 or 1, stderr holds only one-line ``error:``/``warning:`` messages;
* a command that reads the file exits 1 with a line naming ``config/<name>``, and the rest of
  its answer stands (the same records, hops and topics as on the intact store);
* a command that does not read it answers exactly as on the intact store.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from robust_harness import STORES, assert_no_crash, run_inproc

UNIQ = "C000020247AB5FFD2B276B8361EB0006"
CONSUMER_OFFSETS = (
    '{"offsetTable":{"JourneyTopic@cg_journey":{0:5,1:3},'
    '"%RETRY%cg_journey@cg_journey":{0:2}}}'
)
TOPICS = (
    '{"topicConfigTable":{"JourneyTopic":{"topicName":"JourneyTopic","readQueueNums":4,'
    '"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,'
    '"order":false}},"dataVersion":{"timestamp":1,"counter":1}}'
)
GROUPS = (
    '{"subscriptionGroupTable":{"cg_journey":{"groupName":"cg_journey","consumeEnable":true,'
    '"retryQueueNums":1,"retryMaxTimes":3,"brokerId":0}},"dataVersion":{"timestamp":1,'
    '"counter":1}}'
)

# command -> how its answer is compared (the part that must stand whatever the configs say)
COMMANDS: dict[str, tuple[list[str], Callable[[str], Any]]] = {
    "inspect": (["inspect", "{root}", "--json"],
                lambda out: sorted(t["topic"] for t in json.loads(out)["topics"])),
    "trace": (["trace", "{root}", UNIQ, "--json"],
              lambda out: [h["commitLogOffset"] for h in json.loads(out)["hops"]]),
    "trace-key": (["trace", "{root}", "--key", "j-always-0", "--json"],
                  lambda out: [[h["commitLogOffset"] for h in t["hops"]]
                               for t in json.loads(out)["traces"]]),
    "messages": (["messages", "{root}", "--jsonl"], lambda out: out),
    "cq": (["cq", "{root}", "--jsonl"], lambda out: out),
    "index": (["index", "{root}", "--key", "j-always-0", "--json"], lambda out: out),
    "msg": (["msg", "{root}", UNIQ, "--json"], lambda out: out),
    "dlq list": (["dlq", "list", "{root}", "--json"], lambda out: out),
    "dlq show": (["dlq", "show", "{root}", "--group", "cg_journey", "--json"],
                 lambda out: [m.get("commitLogOffset") for m in json.loads(out)["messages"]]
                 if isinstance(json.loads(out), dict) else out),
    "verify": (["verify", "{root}", "--json"],
               lambda out: json.loads(out)["summary"]["messages"]
               if "messages" in json.loads(out)["summary"] else None),
}
# which commands read which config file (a reader must name the broken file and exit 1)
READERS = {
    "delayOffset.json": {"inspect", "trace", "trace-key", "verify"},
    "consumerOffset.json": {"inspect", "trace", "trace-key", "verify"},
    "topics.json": {"verify"},
    "subscriptionGroup.json": {"verify"},
}
GOOD = {"consumerOffset.json": CONSUMER_OFFSETS, "topics.json": TOPICS,
        "subscriptionGroup.json": GROUPS}


def _empty_with_bak(cfg: Path, name: str) -> None:
    p = cfg / name
    (cfg / f"{name}.bak").write_bytes(p.read_bytes())
    p.write_bytes(b"")


def _truncated_no_bak(cfg: Path, name: str) -> None:
    p = cfg / name
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    (cfg / f"{name}.bak").unlink(missing_ok=True)


def _not_utf8(cfg: Path, name: str) -> None:
    (cfg / name).write_bytes(b'{"offsetTable":{1:\xff}}')
    (cfg / f"{name}.bak").unlink(missing_ok=True)


def _directory(cfg: Path, name: str) -> None:
    (cfg / name).unlink()
    (cfg / name).mkdir()
    (cfg / f"{name}.bak").unlink(missing_ok=True)


BREAKS = [_empty_with_bak, _truncated_no_bak, _not_utf8, _directory]


def _run(cmd: str, root: Path) -> tuple[int, str, str]:
    args = [a.format(root=root) for a in COMMANDS[cmd][0]]
    run = run_inproc(args)
    assert_no_crash(run)
    return run.exit_code, run.stdout, run.stderr


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The journey store with every config file present and good, and each command's answer."""
    root = tmp_path_factory.mktemp("intact") / "store"
    shutil.copytree(STORES["4.9.7/journey"], root)
    for name, text in GOOD.items():
        (root / "config" / name).write_text(text)
    answers = {}
    for cmd in COMMANDS:
        code, out, err = _run(cmd, root)
        assert code == 0, (cmd, err)
        answers[cmd] = COMMANDS[cmd][1](out)
    return root, answers


@pytest.mark.parametrize("name", list(READERS))
def test_broken_config_degrades_in_every_command(
    tmp_path: Path, intact: tuple[Path, dict[str, Any]], name: str
) -> None:
    src, answers = intact
    for brk in BREAKS:
        root = tmp_path / brk.__name__ / "store"
        shutil.copytree(src, root)
        brk(root / "config", name)
        # commands that do not read the file: once, on the most hostile break (the cost)
        for cmd in [c for c in COMMANDS if c in READERS[name] or brk is _directory]:
            code, out, err = _run(cmd, root)
            what = (name, brk.__name__, cmd, code, err[-800:])
            if cmd in READERS[name]:
                assert code == 1, what
                assert any(ln.startswith(f"error: config/{name}") for ln in err.splitlines()) \
                    or f'"file": "config/{name}"' in out, what
            else:
                assert code == 0, what
            assert COMMANDS[cmd][1](out) == answers[cmd], what
