"""Damage that reads cleanly record by record: every read command that walks through it says so.

A real 4.9.7 store (fixtures/rocketmq-stores/4.9.7/journey) is damaged in ways no single file
shows: a consume-queue unit rewritten to point at a valid record of another queue; one byte of
a record's UNIQ_KEY flipped (no CRC covers the properties in 4.x: the index still holds the
key the broker indexed); one byte of its TAGS flipped (the unit's tagsCode is the hash of the
tag the broker stored). ``cq``, ``trace``, ``msg``, ``messages`` and ``index --key`` exit 1
with a line naming the consume-queue or index file and the byte offset inside it, found by
verify's own rules; ``verify`` names the same places.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from robust_harness import ERROR_LINE, Run, copy_store, patch, records, run_inproc

from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from mqtool.formats.rules import tags_code_of
from mqtool.store import Store

STORE = "4.9.7/journey"


@dataclass(frozen=True)
class Target:
    """The damaged record and what a command needs to reach it."""

    root: Path
    offset_msg_id: str
    uniq_key: str
    key: str  # one KEYS token


def _target(root: Path, index: int = 2) -> Target:
    """A JourneyTopic message with UNIQ_KEY, KEYS and TAGS (the ``index``-th of the topic)."""
    with Store.open(root) as st:
        m = [m for m in st.messages() if m.topic == "JourneyTopic"][index]
        assert m.uniq_key and m.key_list and m.tags
        return Target(root, m.offset_msg_id, m.uniq_key, m.key_list[0])


def _where(run: Run, file: str, offset: int) -> list[str]:
    """The error lines of ``run`` that name ``file`` at byte ``offset`` inside it."""
    out = []
    for ln in run.stderr.splitlines():
        m = ERROR_LINE.match(ln)
        if m and m["file"] == file and m["off"] is not None and int(m["off"], 16) == offset:
            out.append(ln)
    return out


def _fails_at(args: list[str], file: str, offset: int) -> Run:
    run = run_inproc(args)
    assert run.exit_code == 1, (args, run.exit_code, run.stderr)
    assert _where(run, file, offset), (args, file, hex(offset), run.stderr)
    return run


def _verify_names(root: str, file: str, offset: int) -> None:
    """``verify`` exits 1 with a finding at ``file`` and ``offset``."""
    res = run_inproc(["verify", root, "--json"])
    assert res.exit_code == 1
    assert any(f["file"] == file and f["offset"] == offset
               for f in json.loads(res.stdout)["findings"])


@pytest.fixture
def unit_to_other_queue(tmp_path: Path) -> tuple[Target, str, int]:
    """JourneyTopic/0's unit of the target rewritten to point at a JourneyTopic/1 record (a
    valid record, its own size and tag hash): the target can no longer be consumed."""
    root = copy_store(STORE, tmp_path)
    t = _target(root)
    with Store.open(root) as st:
        msgs = list(st.messages())
        me = next(m for m in msgs if m.offset_msg_id == t.offset_msg_id)
        other = next(m for m in msgs if m.topic == me.topic and m.queue_id != me.queue_id)
        qe = st.queue_entry(me.topic, me.queue_id, me.queue_offset)
        assert qe is not None and qe.entry.commit_log_offset == me.physical_offset
    patch(root / qe.file, qe.file_offset, struct.pack(
        ">qiq", other.physical_offset, other.total_size, tags_code_of(other.tags)))
    return t, qe.file, qe.file_offset


def _flip(root: Path, t: Target, name: str) -> None:
    """Change one character of property ``name``'s value in the target record (a hex digit or
    a letter for another of its kind: the record still decodes)."""
    with Store.open(root) as st:
        phy = next(m.physical_offset for m in st.messages() if m.offset_msg_id == t.offset_msg_id)
    rec = next(r for r in records(root) if int(r.path.name) + r.pos == phy)
    raw = rec.path.read_bytes()[rec.props_pos:rec.props_pos + rec.props_len]
    at = raw.index(name.encode() + b"\x01") + len(name) + 1 + 1  # the value's 2nd character
    new = b"0" if raw[at:at + 1] != b"0" else b"1"
    patch(rec.path, rec.props_pos + at, new)


def _index_entry_of(root: Path, t: Target) -> tuple[str, int]:
    """(index file, byte offset) of the entry the broker wrote for the target's UNIQ_KEY."""
    from mqtool.formats.indexfile import build_key, index_key_hash

    with Store.open(root) as st:
        (rel, reader), = st.index_files()
        h = index_key_hash(build_key("JourneyTopic", t.uniq_key))
        (n, _), = [(n, e) for n, e in reader.lookup_hash_at(h)
                   if e.phy_offset == st.find_by_offset_msg_id(t.offset_msg_id).physical_offset]
        return rel, reader.geometry.entry_pos(n)


def test_unit_rewritten_to_another_queues_record(unit_to_other_queue) -> None:  # type: ignore[no-untyped-def]
    t, file, pos = unit_to_other_queue
    root = str(t.root)
    run = _fails_at(["cq", root, "JourneyTopic"], file, pos)
    assert any("the message there is JourneyTopic/1@" in ln for ln in _where(run, file, pos))
    run = _fails_at(["trace", root, t.uniq_key, "--json"], file, pos)
    hops = json.loads(run.stdout)["hops"]
    original = next(h for h in hops if h["offsetMsgId"] == t.offset_msg_id)
    assert original["state"] == "unreachable", original  # not "consumed": no consumer reads it
    _fails_at(["msg", root, t.offset_msg_id, "--json"], file, pos)
    _fails_at(["messages", root, "--topic", "JourneyTopic", "--jsonl"], file, pos)
    _fails_at(["messages", root, "--jsonl"], file, pos)
    _fails_at(["index", root, "--key", t.key, "--json"], file, pos)
    _verify_names(root, file, pos)


def test_flipped_uniq_key(tmp_path: Path) -> None:
    root = copy_store(STORE, tmp_path)
    t = _target(root)
    file, pos = _index_entry_of(root, t)
    _flip(root, t, "UNIQ_KEY")
    r = str(root)
    for args in (["trace", r, t.offset_msg_id], ["trace", r, t.uniq_key],
                 ["msg", r, t.offset_msg_id], ["messages", r, "--jsonl"],
                 ["messages", r, "--topic", "JourneyTopic"], ["index", r, "--key", t.key]):
        run = _fails_at(args, file, pos)
        assert any("is none of the message's index keys" in ln for ln in _where(run, file, pos))
    # asked by its UNIQ_KEY: no other key is shown under it; the record's key does not match
    run = run_inproc(["trace", r, t.uniq_key])
    assert not run.stdout.strip(), run.stdout
    assert (f"no record with offsetMsgId or UNIQ_KEY {t.uniq_key}" in run.stderr
            and "the record's key does not match" in run.stderr), run.stderr
    _verify_names(r, file, pos)


def test_flipped_tags(tmp_path: Path) -> None:
    root = copy_store(STORE, tmp_path)
    t = _target(root)
    with Store.open(root) as st:
        m = st.find_by_offset_msg_id(t.offset_msg_id)
        assert m is not None
        qe = st.queue_entry(m.topic, m.queue_id, m.queue_offset)
        assert qe is not None
    _flip(root, t, "TAGS")
    r = str(root)
    for args in (["cq", r], ["cq", r, "JourneyTopic", str(m.queue_id), "--json"],
                 ["trace", r, t.uniq_key], ["msg", r, t.offset_msg_id],
                 ["messages", r, "--jsonl"], ["index", r, "--key", t.key]):
        run = _fails_at(args, qe.file, qe.file_offset)
        assert any("tagsCode is not the message's tag hash" in ln
                   for ln in _where(run, qe.file, qe.file_offset))
    assert qe.file_offset % CQ_STORE_UNIT_SIZE == 0


def test_undamaged_store_reads_clean(tmp_path: Path) -> None:
    """The same commands on the undamaged copy: exit 0, nothing on stderr."""
    root = copy_store(STORE, tmp_path)
    t = _target(root)
    r = str(root)
    for args in (["cq", r], ["trace", r, t.uniq_key], ["trace", r, t.offset_msg_id],
                 ["msg", r, t.offset_msg_id], ["messages", r, "--jsonl"],
                 ["index", r, "--key", t.key], ["inspect", r, "--json"]):
        run = run_inproc(args)
        assert run.exit_code == 0, (args, run.stderr)
        assert not run.stderr.strip(), (args, run.stderr)
