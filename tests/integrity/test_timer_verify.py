"""``mqtool verify`` on the 5.x timer files (timerlog, timerwheel, config/timercheck): clean on
the real 5.3.3 store, and each seeded damage found at its file and in-file offset."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integrity_damage import FIXTURES, patch, read_at, tree_digest, verify_json

from mqtool.formats.timer import SLOT_SIZE, UNIT_SIZE

V5 = FIXTURES / "5.3.3" / "plain" / "store"
TIMERLOG = "timerlog/00000000000000000000"
# the real store's wheel (manifest/timer.json; formats/test_timer.py pins it): three slots
DELIVERED_SLOT = 250118  # units 0, 52, 104; due before lastReadTimeMs
PENDING_SLOT = 253715  # unit 156, due 1 h later: still pending
UNIT_OFFSET_PY = 4 + 8 + 4 + 8 + 4  # offsetPy inside a unit (TimerLog.UNIT_PRE_SIZE_FOR_MSG)


def _find(doc: dict[str, Any], file: str, offset: int | None, severity: str) -> list[Any]:
    return [f for f in doc["findings"] if f["file"] == file and f["offset"] == offset
            and f["severity"] == severity and f["kind"] == "timer"]


def test_real_store_timer_files_are_clean() -> None:
    before = tree_digest(V5)
    rc, doc = verify_json(V5)
    assert rc == 0
    assert [f for f in doc["findings"] if f["kind"] == "timer"] == []
    t = doc["summary"]["timer"]
    assert (t["timerlogFiles"], t["timerlogUnits"], t["timerlogEnd"]) == (1, 5, 260)
    assert (t["slots"], t["pendingSlots"], t["precisionMs"]) == (3, 1, 1000)
    assert t["checkpoint"]["lastTimerLogFlushPos"] == 260
    assert tree_digest(V5) == before


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(V5, dst)
    return dst


def _set_unit_offset(store: Path, unit: int, offset_py: int) -> None:
    patch(store / TIMERLOG, unit * UNIT_SIZE + UNIT_OFFSET_PY, struct.pack(">q", offset_py))


def _slot_at(index: int) -> int:
    return index * SLOT_SIZE


Damage = Callable[[Path], tuple[str, int | None, str]]


def _past_data(s: Path) -> tuple[str, int | None, str]:
    _set_unit_offset(s, 3, 10**9)
    return TIMERLOG, 3 * UNIT_SIZE, "error"


def _no_message(s: Path) -> tuple[str, int | None, str]:
    old = struct.unpack(">q", read_at(s / TIMERLOG, 3 * UNIT_SIZE + UNIT_OFFSET_PY, 8))[0]
    _set_unit_offset(s, 3, old + 1)
    return TIMERLOG, 3 * UNIT_SIZE, "error"


def _other_topic(s: Path) -> tuple[str, int | None, str]:
    from integrity_damage import messages

    rec = next(m for m in messages("5.3.3/plain") if m["topic"] == "V5Topic")
    patch(s / TIMERLOG, 4 * UNIT_SIZE + UNIT_OFFSET_PY,
          struct.pack(">qi", rec["phyOffset"], rec["size"]))
    return TIMERLOG, 4 * UNIT_SIZE, "error"


def _bad_magic(s: Path) -> tuple[str, int | None, str]:
    patch(s / TIMERLOG, 3 * UNIT_SIZE + 12, struct.pack(">i", 0x100))
    return TIMERLOG, 3 * UNIT_SIZE, "error"


def _slot_past_timerlog(s: Path) -> tuple[str, int | None, str]:
    patch(s / "timerwheel", _slot_at(PENDING_SLOT) + 16, struct.pack(">q", 52 * 1000))
    return "timerwheel", _slot_at(PENDING_SLOT), "error"


def _slot_wrong_index(s: Path) -> tuple[str, int | None, str]:
    raw = read_at(s / "timerwheel", _slot_at(PENDING_SLOT), SLOT_SIZE)
    patch(s / "timerwheel", _slot_at(PENDING_SLOT + 7), raw)
    return "timerwheel", _slot_at(PENDING_SLOT + 7), "error"


def _slot_chain_other_slot(s: Path) -> tuple[str, int | None, str]:
    patch(s / "timerwheel", _slot_at(PENDING_SLOT) + 8, struct.pack(">qq", 208, 208))
    return TIMERLOG, 208, "error"


def _wheel_truncated(s: Path) -> tuple[str, int | None, str]:
    with open(s / "timerwheel", "r+b") as f:
        f.truncate(SLOT_SIZE * 1000)
    return "timerwheel", None, "error"


def _checkpoint_ahead(s: Path) -> tuple[str, int | None, str]:
    patch(s / "config" / "timercheck", 8, struct.pack(">q", 10 * UNIT_SIZE))
    return "config/timercheck", 8, "error"


def _queue_offset_beyond(s: Path) -> tuple[str, int | None, str]:
    patch(s / "config" / "timercheck", 16, struct.pack(">qq", 50, 50))
    return "config/timercheck", 16, "warning"


def _pending_unit_not_in_wheel(s: Path) -> tuple[str, int | None, str]:
    patch(s / "timerwheel", _slot_at(PENDING_SLOT), bytes(SLOT_SIZE))
    return TIMERLOG, 3 * UNIT_SIZE, "warning"


def _slot_num(s: Path) -> tuple[str, int | None, str]:
    patch(s / "timerwheel", _slot_at(DELIVERED_SLOT) + 24, struct.pack(">i", 5))
    return "timerwheel", _slot_at(DELIVERED_SLOT), "warning"


def _torn_unit(s: Path) -> tuple[str, int | None, str]:
    patch(s / TIMERLOG, 5 * UNIT_SIZE, struct.pack(">i", 7))  # a size field after the data
    return TIMERLOG, 5 * UNIT_SIZE, "error"


DAMAGES: dict[str, Damage] = {
    "unit-past-commitlog-data": _past_data,
    "unit-at-no-message": _no_message,
    "unit-at-other-topic": _other_topic,
    "unit-bad-magic": _bad_magic,
    "slot-past-timerlog": _slot_past_timerlog,
    "slot-wrong-index": _slot_wrong_index,
    "slot-chain-into-other-slot": _slot_chain_other_slot,
    "wheel-wrong-size": _wheel_truncated,
    "checkpoint-flush-ahead": _checkpoint_ahead,
    "checkpoint-queue-offset-beyond-max": _queue_offset_beyond,
    "pending-unit-not-in-wheel": _pending_unit_not_in_wheel,
    "slot-num": _slot_num,
    "unreadable-after-data": _torn_unit,
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_seeded_timer_damage_is_found_at_file_and_offset(tmp_path: Path, name: str) -> None:
    store = _copy(tmp_path)
    file, offset, severity = DAMAGES[name](store)
    before = tree_digest(store)
    rc, doc = verify_json(store)
    hits = _find(doc, file, offset, severity)
    assert hits, [f for f in doc["findings"] if f["kind"] == "timer"]
    assert rc == (1 if severity == "error" else 0)
    assert tree_digest(store) == before  # read-only
