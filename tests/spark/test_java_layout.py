"""The Spark reader's record layout (spark/java/.../RecordLayout.java) is the one table,
formats/commitlog_layout.py: the committed Java file is what the table generates, and the
record loop reads its offsets from it."""

from __future__ import annotations

import re
import subprocess
import sys

from mqtool.formats import commitlog_layout as layout
from mqtool.spark import java_layout


def test_record_layout_java_is_generated_from_the_table() -> None:
    assert java_layout.JAVA_FILE.read_text(encoding="utf-8") == java_layout.render()
    res = subprocess.run([sys.executable, "-m", "mqtool.spark.java_layout", "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_table_adds_up() -> None:
    fixed = [f for f in layout.FIELDS if f.offset is not None]
    for a, b in zip(fixed, fixed[1:], strict=False):
        assert a.width is not None and a.offset is not None
        assert a.offset + a.width == b.offset, (a, b)
    assert layout.MIN_RECORD_SIZE == 91  # calMsgLength(V1, IPv4 hosts, empty parts)
    assert all((f.width is None) == bool(f.width_from) for f in layout.FIELDS)


def test_java_record_readers_read_no_literal_offsets() -> None:
    readers = [f for f in sorted(java_layout.JAVA_FILE.parent.glob("*.java"))
               if f != java_layout.JAVA_FILE and "RecordLayout." in f.read_text(encoding="utf-8")]
    assert java_layout.JAVA_FILE.parent / "CommitlogDecoder.java" in readers
    for f in readers:  # every Java reader of records: no field at a literal offset
        # a record field read at a literal offset from the record start (b.getInt(p + 36), ...)
        found = re.findall(r"b\.get\w*\(\s*(?:p|at|c)\s*\+\s*\d+\s*\)",
                           f.read_text(encoding="utf-8"))
        assert not found, (f.name, found)
    src = (java_layout.JAVA_FILE.parent / "CommitlogDecoder.java").read_text(encoding="utf-8")
    for name in ("SYSFLAG_AT", "BORNHOST_AT", "PHYSICALOFFSET_AT", "QUEUEOFFSET_AT"):
        assert name in src
