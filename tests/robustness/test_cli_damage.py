"""Damaged stores through every read command: one error line per finding, exit 1.

Each scenario damages a private copy of a real fixture store in one specific way, then runs
every read command in every output mode in-process (fast), asserting that no exception escapes
and that the commands which must read the damaged bytes exit 1 with one well-formed line per
finding, ``error: <file> @ 0x<offset inside the file>: <detail>``, one of them naming the
damaged file (config JSON: the file, the offset when known). A representative subset runs as
real subprocesses under a memory cap and a timeout.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from robust_harness import (
    STORES,
    Run,
    assert_clean_failure,
    assert_no_crash,
    copy_store,
    patch,
    records,
    run_inproc,
    run_subprocess,
    truncate,
)

# every read command in each output mode; "{off}" is the damaged record's commitlog offset
COMMANDS: dict[str, list[str]] = {
    "inspect": ["inspect"],
    "inspect-json": ["inspect", "--json"],
    "messages": ["messages"],
    "messages-json": ["messages", "--json"],
    "messages-jsonl": ["messages", "--jsonl", "--body", "base64"],
    "cq": ["cq"],
    "cq-json": ["cq", "--json"],
    "cq-jsonl": ["cq", "--jsonl"],
    "index": ["index"],
    "index-json": ["index", "--json"],
    "index-key": ["index", "--key", "order-0"],
    "index-key-json": ["index", "--key", "order-0", "--json"],
    "msg-offset": ["msg", "{off}"],
    "msg-offset-json": ["msg", "{off}", "--json"],
    "msg-id-json": ["msg", "C0A8010A00002A9F0000000000000000", "--json"],
}
READS_COMMITLOG = {"inspect", "inspect-json", "messages", "messages-json", "messages-jsonl"}
READS_CQ = {"inspect", "inspect-json", "cq", "cq-json", "cq-jsonl"}
READS_INDEX = {"inspect", "inspect-json", "index", "index-json", "index-key", "index-key-json"}
READS_RECORD = READS_COMMITLOG | {"msg-offset", "msg-offset-json"}
EVERY = set(COMMANDS)


@dataclass(frozen=True)
class Damage:
    """What a scenario broke: the file (relative name in the message) and the record offset."""

    file: str
    record_offset: int = 0  # commitlog position of the damaged record
    offset_known: bool = True
    exit_code: int = 1  # 2 when the path names no store (usage, the README's exit table)

    @property
    def where(self) -> str:
        """``FILE @ 0xIN-FILE (phy N)``, as error lines name a commitlog record."""
        base = int(self.file.rsplit("/", 1)[1])
        return f"{self.file} @ {self.record_offset - base:#x} (phy {self.record_offset})"


def _record(root: Path, i: int):  # type: ignore[no-untyped-def]
    return records(root)[i]


def _rel(p: Path, root: Path) -> str:
    return p.relative_to(root).as_posix()


# --- scenarios: (store, damage function, commands that must fail) -----------------------------
def truncated_mid_record(root: Path) -> Damage:
    r = _record(root, -1)
    truncate(r.path, r.pos + r.total_size // 2)
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def truncated_in_header(root: Path) -> Damage:
    r = _record(root, -1)
    truncate(r.path, r.pos + 5)
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def flipped_magic(root: Path) -> Damage:
    r = _record(root, 3)
    patch(r.path, r.pos + 4, bytes([r.path.read_bytes()[r.pos + 4] ^ 0x40]))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def flipped_body_length(root: Path) -> Damage:
    r = _record(root, 2)
    raw = r.path.read_bytes()
    body_len_pos = r.pos + 84  # IPv4 born and store hosts (as in the journey store)
    (blen,) = struct.unpack_from(">i", raw, body_len_pos)
    patch(r.path, body_len_pos, struct.pack(">i", blen ^ 0x0100))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def zero_filled_region(root: Path) -> Damage:
    r = _record(root, 1)  # first file, followed by more data: zeros cannot be the end
    patch(r.path, r.pos, bytes(r.total_size + 40))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def random_garbage(root: Path) -> Damage:
    import random

    r = _record(root, 4)
    patch(r.path, r.pos, random.Random(4).randbytes(64))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def total_size_max(root: Path) -> Damage:
    r = _record(root, 5)
    patch(r.path, r.pos, struct.pack(">i", 2**31 - 1))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def total_size_negative(root: Path) -> Damage:
    r = _record(root, 5)
    patch(r.path, r.pos, struct.pack(">i", -(2**31)))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def properties_not_utf8(root: Path) -> Damage:
    r = _record(root, 6)
    patch(r.path, r.props_pos + 1, b"\xff\xfe")
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def topic_not_utf8(root: Path) -> Damage:
    r = _record(root, 6)
    patch(r.path, r.topic_pos, b"\xc3\x28")
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def physical_offset_wrong(root: Path) -> Damage:
    r = _record(root, 7)
    raw = r.path.read_bytes()
    (phy,) = struct.unpack_from(">q", raw, r.pos + 28)
    patch(r.path, r.pos + 28, struct.pack(">q", phy + 8))
    return Damage(_rel(r.path, root), int(r.path.name) + r.pos)


def empty_commitlog_in_the_middle(root: Path) -> Damage:
    files = sorted((root / "commitlog").iterdir())
    truncate(files[1], 0)
    return Damage(_rel(files[2], root))


def commitlog_file_is_a_directory(root: Path) -> Damage:
    files = sorted((root / "commitlog").iterdir())
    files[1].unlink()
    files[1].mkdir()
    return Damage(_rel(files[2], root))


def _full_cq_file(root: Path) -> Path:
    """A consume-queue file, one with no zero tail (every unit written) if there is one."""
    files = sorted((root / "consumequeue").rglob("0000*"))
    full = [p for p in files if p.read_bytes()[-20:].strip(b"\0")]
    return (full or [p for p in files if p.stat().st_size])[0]


def cq_odd_size(root: Path) -> Damage:
    p = _full_cq_file(root)
    truncate(p, p.stat().st_size - 7)
    return Damage(_rel(p, root))


def cq_empty(root: Path) -> Damage:
    p = _full_cq_file(root)
    truncate(p, 0)
    return Damage(_rel(p, root))


def _index_file(root: Path) -> Path:
    return sorted((root / "index").iterdir())[0]


def index_hostile_slots(root: Path) -> Damage:
    p = _index_file(root)
    n = (p.stat().st_size - 40) // 84  # slots (RocketMQ's 4 entries per slot)
    patch(p, 40, struct.pack(">i", 2**31 - 1) * n)
    return Damage(_rel(p, root), offset_known=False)


def index_negative_slots(root: Path) -> Damage:
    p = _index_file(root)
    n = (p.stat().st_size - 40) // 84
    patch(p, 40, struct.pack(">i", -5) * n)
    return Damage(_rel(p, root), offset_known=False)


def index_truncated(root: Path) -> Damage:
    p = _index_file(root)
    truncate(p, 30)
    return Damage(_rel(p, root))


def index_empty(root: Path) -> Damage:
    p = _index_file(root)
    truncate(p, 0)
    return Damage(_rel(p, root))


def index_count_huge(root: Path) -> Damage:
    p = _index_file(root)
    patch(p, 36, struct.pack(">i", 2**31 - 1))
    return Damage(_rel(p, root), offset_known=False)


def config_malformed(root: Path) -> Damage:
    (root / "config" / "delayOffset.json").write_bytes(b'{"offsetTable":{1:2,')
    return Damage("config/delayOffset.json")


def config_empty(root: Path) -> Damage:
    (root / "config" / "delayOffset.json").write_bytes(b"")
    return Damage("config/delayOffset.json")


def config_not_utf8(root: Path) -> Damage:
    (root / "config" / "delayOffset.json").write_bytes(b'{"offsetTable":{1:\xff}}')
    return Damage("config/delayOffset.json", offset_known=False)


def config_wrong_shape(root: Path) -> Damage:
    (root / "config" / "delayOffset.json").write_bytes(b'{"offsetTable":[1,2,3]}')
    return Damage("config/delayOffset.json", offset_known=False)


def checkpoint_truncated(root: Path) -> Damage:
    truncate(root / "checkpoint", 17)
    return Damage("checkpoint")


def checkpoint_is_a_directory(root: Path) -> Damage:
    (root / "checkpoint").unlink()
    (root / "checkpoint").mkdir()
    return Damage("checkpoint", offset_known=False)


def consumequeue_is_a_file(root: Path) -> Damage:
    shutil.rmtree(root / "consumequeue")
    (root / "consumequeue").write_bytes(b"not a directory")
    return Damage("consumequeue", offset_known=False)


def index_dir_is_a_file(root: Path) -> Damage:
    shutil.rmtree(root / "index")
    (root / "index").write_bytes(b"")
    return Damage("index", offset_known=False)


def queue_dir_is_a_file(root: Path) -> Damage:
    q = sorted((root / "consumequeue").iterdir())[0] / "0"
    shutil.rmtree(q)
    q.write_bytes(bytes(20))
    return Damage(_rel(q, root), offset_known=False)


def commitlog_dir_is_a_file(root: Path) -> Damage:
    shutil.rmtree(root / "commitlog")
    (root / "commitlog").write_bytes(b"")
    return Damage(root.name, offset_known=False, exit_code=2)


def store_missing(root: Path) -> Damage:
    shutil.rmtree(root)
    return Damage(root.name, offset_known=False, exit_code=2)


def store_is_a_file(root: Path) -> Damage:
    shutil.rmtree(root)
    root.write_bytes(b"")
    return Damage(root.name, offset_known=False, exit_code=2)


SCENARIOS: list[tuple[str, Callable[[Path], Damage], set[str]]] = [
    ("4.9.7/journey", truncated_mid_record, READS_COMMITLOG),
    ("4.9.7/journey", truncated_in_header, READS_COMMITLOG),
    ("5.3.3/plain", truncated_mid_record, READS_COMMITLOG),
    ("4.9.7/journey", flipped_magic, READS_RECORD),
    ("4.9.7/journey", flipped_body_length, READS_RECORD),
    ("4.9.7/journey", zero_filled_region, READS_RECORD),
    ("4.9.7/journey", random_garbage, READS_RECORD),
    ("5.3.3/plain", random_garbage, READS_RECORD),
    ("4.9.7/journey", total_size_max, READS_RECORD),
    ("4.9.7/journey", total_size_negative, READS_RECORD),
    ("4.9.7/journey", properties_not_utf8, READS_RECORD),
    ("5.3.3/plain", properties_not_utf8, READS_RECORD),
    ("4.9.7/journey", topic_not_utf8, READS_RECORD),
    ("4.9.7/journey", physical_offset_wrong, READS_RECORD),
    ("4.9.7/journey", empty_commitlog_in_the_middle, READS_COMMITLOG),
    ("4.9.7/journey", commitlog_file_is_a_directory, READS_COMMITLOG),
    ("4.9.7/journey", cq_odd_size, READS_CQ),
    ("4.9.7/journey", cq_empty, READS_CQ),
    ("5.3.3/plain", cq_odd_size, READS_CQ),
    ("4.9.7/plain", index_hostile_slots, READS_INDEX),
    ("4.9.7/plain", index_negative_slots, READS_INDEX),
    ("4.9.7/plain", index_truncated, READS_INDEX),
    ("4.9.7/plain", index_empty, READS_INDEX),
    ("4.9.7/plain", index_count_huge, READS_INDEX),
    ("4.9.7/journey", config_malformed, {"inspect", "inspect-json"}),
    ("4.9.7/journey", config_empty, {"inspect", "inspect-json"}),
    ("4.9.7/journey", config_not_utf8, {"inspect", "inspect-json"}),
    ("5.3.3/plain", config_wrong_shape, {"inspect", "inspect-json"}),
    ("4.9.7/journey", checkpoint_truncated, {"inspect", "inspect-json"}),
    ("4.9.7/journey", checkpoint_is_a_directory, EVERY),
    ("4.9.7/journey", consumequeue_is_a_file, EVERY),
    ("4.9.7/journey", index_dir_is_a_file, EVERY),
    ("4.9.7/journey", queue_dir_is_a_file, READS_CQ),
    ("4.9.7/journey", commitlog_dir_is_a_file, EVERY),
    ("4.9.7/journey", store_missing, EVERY),
    ("4.9.7/journey", store_is_a_file, EVERY),
]
SLOW_TABLES = {"messages", "cq"}  # rich tables of the 2,099-message store take seconds


def _args(cmd: str, root: Path, damage: Damage) -> list[str]:
    words = COMMANDS[cmd]
    return [words[0], str(root), *(w.format(off=damage.record_offset) for w in words[1:])]


def _check(cmd: str, run: Run, damage: Damage, must_fail: set[str]) -> None:
    assert_no_crash(run)
    if cmd in must_fail:
        assert_clean_failure(run, file=damage.file, exit_code=damage.exit_code,
                             offset=damage.offset_known and not cmd.startswith("msg"))


@pytest.mark.parametrize(
    ("store", "damage_fn", "must_fail"), SCENARIOS,
    ids=[f"{s}:{f.__name__}" for s, f, _ in SCENARIOS],
)
def test_damaged_store_every_command(
    tmp_path: Path, store: str, damage_fn: Callable[[Path], Damage], must_fail: set[str]
) -> None:
    root = copy_store(store, tmp_path)
    damage = damage_fn(root)
    for cmd in COMMANDS:
        if store == "4.9.7/plain" and cmd in SLOW_TABLES:
            continue
        _check(cmd, run_inproc(_args(cmd, root, damage)), damage, must_fail)


def test_record_damage_names_the_record_offset(tmp_path: Path) -> None:
    root = copy_store("4.9.7/journey", tmp_path)
    damage = total_size_max(root)
    run = run_inproc(["messages", str(root), "--jsonl"])
    assert_clean_failure(run, file=damage.file)
    assert f"{damage.where}: " in run.stderr
    # only the damaged record is lost: the walk resynchronises on the next one
    recs = records(copy_store("4.9.7/journey", tmp_path / "clean"))
    assert len(run.stdout.splitlines()) == len(recs) - 1
    run = run_inproc(["msg", str(root), str(damage.record_offset), "--json"])
    assert_clean_failure(run, file=damage.file)
    assert f"{damage.where}: " in run.stderr


def test_cq_odd_size_regression_no_buffer_error(tmp_path: Path) -> None:
    """fix: closing the consume-queue map while iter_cq's view was exported (BufferError)."""
    root = copy_store("4.9.7/journey", tmp_path)
    p = root / "consumequeue" / "%RETRY%cg_journey" / "0" / "00000000000000000000"
    truncate(p, 153)
    for mode in ("--jsonl", "--json"):
        run = run_inproc(["cq", str(root), mode])
        assert_clean_failure(run, file="consumequeue/%RETRY%cg_journey/0/00000000000000000000")
        assert "@ 0x8c: consume-queue file size 153 is not a multiple of 20" in run.stderr
    run = run_inproc(["inspect", str(root), "--json"])
    assert_clean_failure(run, file="consumequeue/%RETRY%cg_journey/0/00000000000000000000")


def test_gap_between_commitlog_files_is_an_error_not_a_warning(tmp_path: Path) -> None:
    """fix: an empty commitlog file in the middle only warned and exited 0, messages missing."""
    root = copy_store("4.9.7/journey", tmp_path)
    truncate(root / "commitlog" / "00000000000000004096", 0)
    run = run_inproc(["messages", str(root), "--jsonl"])
    assert_clean_failure(run, file="commitlog/00000000000000008192")
    assert "@ 0x0 (phy 4096): file starts at 8192 but the previous one ends at 4096" in run.stderr
    # the consume-queue units whose records were in the emptied file name no record now
    run = run_inproc(["cq", str(root), "--jsonl"])
    assert_clean_failure(run, file="consumequeue/")
    assert ("(phy 4930): unit %DLQ%cg_journey/0@0 -> commitlog offset 4930 size 359: no "
            "readable message starts there") in run.stderr


# --- real processes: memory cap, timeout, and the exit status the shell sees ------------------
SUBPROCESS_CASES = [
    ("4.9.7/journey", truncated_mid_record, "messages-jsonl"),
    ("4.9.7/journey", truncated_mid_record, "inspect"),
    ("4.9.7/journey", total_size_max, "messages"),
    ("4.9.7/journey", total_size_max, "msg-offset-json"),
    ("4.9.7/journey", zero_filled_region, "inspect-json"),
    ("4.9.7/journey", random_garbage, "messages-json"),
    ("4.9.7/journey", properties_not_utf8, "messages-jsonl"),
    ("5.3.3/plain", properties_not_utf8, "msg-offset"),
    ("4.9.7/journey", topic_not_utf8, "messages"),
    ("4.9.7/journey", cq_odd_size, "cq-jsonl"),
    ("4.9.7/journey", cq_odd_size, "cq"),
    ("4.9.7/plain", index_hostile_slots, "index-key-json"),
    ("4.9.7/plain", index_count_huge, "index"),
    ("4.9.7/plain", index_truncated, "inspect-json"),
    ("4.9.7/journey", config_malformed, "inspect"),
    ("4.9.7/journey", config_empty, "inspect-json"),
    ("4.9.7/journey", checkpoint_is_a_directory, "messages-jsonl"),
    ("4.9.7/journey", consumequeue_is_a_file, "cq-json"),
    ("4.9.7/journey", store_missing, "inspect"),
    ("4.9.7/journey", store_is_a_file, "msg-id-json"),
]


@pytest.mark.parametrize(
    ("store", "damage_fn", "cmd"), SUBPROCESS_CASES,
    ids=[f"{s}:{f.__name__}:{c}" for s, f, c in SUBPROCESS_CASES],
)
def test_damaged_store_subprocess(
    tmp_path: Path, store: str, damage_fn: Callable[[Path], Damage], cmd: str
) -> None:
    root = copy_store(store, tmp_path)
    damage = damage_fn(root)
    run = run_subprocess(_args(cmd, root, damage))
    assert_clean_failure(run, file=damage.file, exit_code=damage.exit_code,
                         offset=damage.offset_known and not cmd.startswith("msg"))


def test_stores_are_the_fixtures() -> None:
    assert all(p.is_dir() for p in STORES.values())


def test_hostile_large_index_file_does_not_hang(tmp_path: Path) -> None:
    """fix: index_geometry tried every slot count one by one (~8 million for this 168 MB
    file, minutes): a large index of non-default size with a bogus header hung every command."""
    root = copy_store("4.9.7/journey", tmp_path)
    for p in (root / "index").iterdir():
        p.unlink()
    p = root / "index" / "20261121210445514"
    with open(p, "wb") as f:  # sparse: costs no disk
        f.write(struct.pack(">qqqqii", 1, 2, 3, 4, 7, 9))
        f.truncate(168_000_040 + 20)
    run = run_subprocess(["index", str(root), "--json"])  # TIMEOUT_S bounds it
    assert_clean_failure(run, file="index/20261121210445514", offset=False)
    assert "cannot tell the slot/entry geometry" in run.stderr


def test_delay_offset_beyond_the_schedule_queue_max_is_a_finding(tmp_path: Path) -> None:
    """A delayOffset.json offset past its SCHEDULE_TOPIC_XXXX queue's max is a finding
    (exit 1), not only a row of the table."""
    root = copy_store("4.9.7/journey", tmp_path)
    (root / "config" / "delayOffset.json").write_text('{"offsetTable":{2:999}}')
    (root / "config" / "delayOffset.json.bak").unlink(missing_ok=True)
    run = run_inproc(["inspect", str(root), "--json"])
    assert run.exit_code == 1
    assert "config/delayOffset.json: delay level 2: offset 999 is beyond the max offset" in (
        run.stderr)


def test_impossible_and_dangling_cq_units_are_findings_and_not_counted(tmp_path: Path) -> None:
    """Units with offset -1 / size -1, or pointing past the commitlog data, are findings
    of `cq` (exit 1) and are not counted by `inspect` in the queue max."""
    import json

    root = copy_store("4.9.7/journey", tmp_path)
    qdir = root / "consumequeue" / "JourneyTopic" / "0"
    p = sorted(qdir.iterdir())[-1]
    raw = p.read_bytes()
    units = len(raw.rstrip(b"\0") + b"\0" * (-len(raw.rstrip(b"\0")) % 20)) // 20
    clean = json.loads(run_inproc(["inspect", str(root), "--json"]).stdout)
    with p.open("r+b") as f:  # two more units after the last written one
        f.seek(units * 20)
        f.write(struct.pack(">qiq", -1, -1, 0) + struct.pack(">qiq", 10**9, 300, 0))
    run = run_inproc(["cq", str(root), "JourneyTopic", "0", "--json"])
    assert run.exit_code == 1
    rel = _rel(p, root)
    assert (f"error: {rel} @ {units * 20:#x}: unit JourneyTopic/0@{units} -> commitlog offset "
            "-1 size -1: impossible values") in run.stderr
    assert (f"error: {rel} @ {(units + 1) * 20:#x} (phy 1000000000): unit JourneyTopic/0@"
            f"{units + 1} -> commitlog offset 1000000000 size 300: points past the valid "
            "commitlog data") in run.stderr
    run = run_inproc(["inspect", str(root), "--json"])
    assert run.exit_code == 1

    def qmax(doc: dict) -> int:  # type: ignore[type-arg]
        t = next(t for t in doc["topics"] if t["topic"] == "JourneyTopic")
        return int(next(q for q in t["queues"] if q["queueId"] == 0)["maxOffset"])

    assert qmax(json.loads(run.stdout)) == qmax(clean)


def test_body_crc_mismatch_in_messages_is_a_finding(tmp_path: Path) -> None:
    root = copy_store("4.9.7/journey", tmp_path)
    r = _record(root, 2)
    raw = r.path.read_bytes()
    body_len_pos = r.pos + 84  # IPv4 born and store hosts (as in the journey store)
    (blen,) = struct.unpack_from(">i", raw, body_len_pos)
    assert blen > 0
    patch(r.path, body_len_pos + 4, bytes([raw[body_len_pos + 4] ^ 0x20]))
    run = run_inproc(["messages", str(root), "--jsonl"])
    assert run.exit_code == 1
    assert len(run.stdout.splitlines()) == len(records(root))  # the record still prints
    base = int(r.path.name)
    assert f"error: {_rel(r.path, root)} @ {r.pos:#x} (phy {base + r.pos}): body CRC mismatch" \
        in run.stderr
