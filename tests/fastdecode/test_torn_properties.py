"""Torn properties: zeros at the end of a record whose lengths still add up (the page holding
the record's tail was never written; 4.9.7 has no CRC over the properties).

The one rule (``commitlog.properties_torn``: non-empty properties never end in a zero byte) is
applied by parse_message, both walks of the walker, the compiled kernel, the fused kernel and
field_walker alike: the record is an unreadable region of kind ``properties-torn`` at the
record's own file offset, and the walk goes on at the next record. The real stores show the
fact the rule stands on, and none of their records is taken for torn.
"""

from __future__ import annotations

import pytest

from conftest import SCENARIOS, store_dir
from mqtool.formats import commitlog_columns
from mqtool.formats import commitlog_fields as fields
from mqtool.formats.commitlog import CommitLogMessage, FileEnd, parse_message, properties_torn
from mqtool.formats.errors import TornPropertiesError
from mqtool.formats.field_walker import walk_fields
from mqtool.formats.walker import Unreadable, looks_like_record_at, scan_file, walk

TORN = TornPropertiesError.kind


def _files(name: str) -> list[tuple[str, int, bytes]]:
    return [(f"commitlog/{p.name}", int(p.name), p.read_bytes())
            for p in sorted((store_dir(name) / "commitlog").iterdir())]


def _messages(data: bytes, start: int) -> list[CommitLogMessage]:
    return [m for m in scan_file(data, file_start=start) if isinstance(m, CommitLogMessage)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_real_properties_end_as_rocketmq_writes_them(name: str) -> None:
    """4.9.1+ drop the last ``\\x02`` (4.9.7 stores end with a value), 5.2+ keep it (every
    5.3.3 record ends with the ``__CRC32#`` property's ``\\x02``); never with a zero byte."""
    ends = []
    for _rel, start, data in _files(name):
        for m in _messages(data, start):
            end = m.physical_offset - start + m.total_size
            raw = m.properties_raw.encode()
            assert raw and not properties_torn(data, end, len(raw))
            ends.append(raw[-1:])
    assert ends
    if name.startswith("5."):
        assert set(ends) == {b"\x02"}
    else:
        assert b"\x02" not in ends and b"\x00" not in ends


def _torn_copy(name: str, last: bool, k: int | None) -> tuple[str, int, bytes, int, int]:
    """A commitlog file of ``name`` with the last ``k`` (None: all) property bytes of one
    record zeroed: its file's last record (``last``) or one followed by another record."""
    for rel, start, data in _files(name):
        msgs = _messages(data, start)
        if len(msgs) < 2:
            continue
        m = msgs[-1] if last else msgs[len(msgs) // 2 - 1]
        pos = m.physical_offset - start
        plen = len(m.properties_raw.encode())
        zeros = plen if k is None else k
        bad = bytearray(data)
        bad[pos + m.total_size - zeros : pos + m.total_size] = bytes(zeros)
        return rel, start, bytes(bad), pos, m.total_size
    raise AssertionError("no file with two records")  # pragma: no cover


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("last", [False, True], ids=["inside-data", "last-record"])
@pytest.mark.parametrize("k", [1, None], ids=["one-byte", "all-properties"])
def test_torn_properties_are_one_region_at_the_record(name: str, last: bool,
                                                      k: int | None) -> None:
    rel, start, bad, pos, size = _torn_copy(name, last, k)
    with pytest.raises(TornPropertiesError) as ei:
        parse_message(bad, pos, file=rel, file_start=start)
    assert (ei.value.file, ei.value.offset, ei.value.phy) == (rel, pos, start + pos)
    assert not looks_like_record_at(bad, pos, start)

    items = list(walk(bad, file=rel, file_start=start))
    regions = [i for i in items if isinstance(i, Unreadable)]
    assert [(r.kind, r.file, r.offset) for r in regions] == [(TORN, rel, pos)]
    records = [i.physical_offset - start for i in items if isinstance(i, CommitLogMessage)]
    assert pos not in records
    end = items[-1]
    assert isinstance(end, FileEnd)
    if last:
        assert (end.kind, end.physical_offset) == ("torn", start + pos) or end.kind == "blank"
    else:
        assert pos + size in records  # the walk goes on at the next record
    # the position walk (data end) follows the same rule
    plain = list(walk(bad, file=rel, file_start=start, decode=False))
    assert [i for i in plain if isinstance(i, Unreadable)] == regions
    assert [i for i in plain if isinstance(i, int)] == records
    assert plain[-1] == end

    # the kernels stop at the record, and field_walker hands it to the walker
    table, q, status = fields.scan_buffer(bad, 0, file_start=start)
    assert (q, status) == (pos, fields.STOP_ANOMALY)
    w, q2, status2 = commitlog_columns.Decoder().window(
        fields.as_bytes(bad), 0, len(bad), file_start=start
    )
    assert (w.n, q2, status2) == (table.shape[1], pos, fields.STOP_ANOMALY)
    got = []
    found = []
    for item in walk_fields(bad, file=rel, file_start=start):
        if isinstance(item, Unreadable):
            found.append((item.kind, item.file, item.offset))
        elif hasattr(item, "shape"):
            got += item[fields.F_POS].tolist()
        elif isinstance(item, CommitLogMessage):  # pragma: no cover - the kernel takes all
            got.append(item.physical_offset - start)
    assert found == [(TORN, rel, pos)] and got == records
    # the bulk decoders end the file where scan_file (RocketMQ's recovery view) does
    _, fend = commitlog_columns.decode_file(bad, file=rel, file_start=start)
    want = list(scan_file(bad, file=rel, file_start=start))[-1]
    assert fend == want and want.physical_offset == start + pos
