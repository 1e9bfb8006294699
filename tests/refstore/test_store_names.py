"""The reference store never makes a file outside itself, whatever the caller asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqtool.refstore.engine import Message, RefStore
from mqtool.refstore.mapped import RefStoreError


@pytest.mark.parametrize("topic", ["../../escaped", "..", "", "a/b", "x" * 300, "T@G"])
def test_no_topic_becomes_a_path_outside_the_store(tmp_path: Path, topic: str) -> None:
    store = tmp_path / "s" / "store"
    with RefStore.open(store) as rs:
        with pytest.raises(RefStoreError, match="topic name"):
            rs.create_topic(topic)
        with pytest.raises(RefStoreError, match="topic name"):
            rs.put(Message(topic, b"x"))
        rs.topics[topic] = rs.topics["TBW102"]  # a config loaded with such a name, say
        with pytest.raises(RefStoreError, match="topic name"):
            rs.put(Message(topic, b"x", queue_id=0))
        del rs.topics[topic]
        with pytest.raises(RefStoreError, match="group name"):
            rs.create_group(topic.replace("T@G", "G@T") or "")
        rs.put(Message("Fine", b"x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["store"]
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == ["Fine"]
