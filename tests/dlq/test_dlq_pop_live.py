"""POP dead letters resent to a live cluster (`mqtool serve`): a group with
``enableRetryTopicV2`` pops ``%RETRY%<group>+<topic>``, a name a broker refuses in a send, so
``--to retry`` is refused before anything is sent, with the way out named; ``--to original``
reaches the original topic."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_helpers import Served, mqtool

from conftest import store_dir
from mqtool.dlq import DlqSelection, select_dlq
from mqtool.store import Store
from tests.serve.conftest import create_topic

POP = "5.3.3/pop"
GROUP_V2 = "cg_pop2"  # its POP retry topic is %RETRY%cg_pop2+PopTopic2


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path / "served", tmp_path / "serve.log").start()
    yield s
    s.kill()


def test_v2_retry_topic_is_refused_and_original_is_reached(served: Served,
                                                           tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(store_dir(POP), source)
    with Store.open(source) as st:
        dead = list(select_dlq(st, DlqSelection(GROUP_V2)))
    assert dead and {m.properties["RETRY_TOPIC"] for m in dead} == {
        "%RETRY%cg_pop2+PopTopic2"}
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    args = ["dlq", "resend", str(source), "-g", GROUP_V2, "--namesrv", served.namesrv]

    refused = mqtool(*args, "--to", "retry", env=env)
    assert refused.returncode == 3, refused.stderr
    errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "a broker refuses sends to %RETRY%cg_pop2+PopTopic2" in \
        errors[0] and "--to original" in errors[0], refused.stderr

    create_topic(served.broker, "PopTopic2")
    sent = mqtool(*args, "--to", "original", "--json", env=env)
    assert sent.returncode == 0, sent.stderr
    rep = json.loads(sent.stdout)
    assert (rep["sent"], rep["failed"]) == (len(dead), 0)
    with Store.open(served.store) as st:
        copies = [m for m in st.messages() if m.topic == "PopTopic2"]
    assert sorted(m.body for m in copies) == sorted(m.body for m in dead)
