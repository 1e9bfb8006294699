"""The reference store writes consume-queue units and index files with the layouts of
formats/ (one home per record layout), not with structs of its own."""

from __future__ import annotations

import re
from pathlib import Path

from mqtool.formats import consumequeue, indexfile
from mqtool.refstore import mapped

ROOT = Path(__file__).resolve().parents[2]
#: struct formats of the 20-byte CQ unit, the index header and the index entry
_LAYOUTS = re.compile(r"""Struct\(\s*["'][<>!=@]?(qiq|qqqqii|iqii)["']\s*\)""")


def test_refstore_uses_the_formats_structs() -> None:
    assert mapped._CQ is consumequeue.CQ_UNIT_STRUCT
    assert mapped._IDX_HEADER is indexfile.INDEX_HEADER_STRUCT
    assert mapped._IDX_ENTRY is indexfile.INDEX_ENTRY_STRUCT
    assert mapped._ENTRY_DTYPE is indexfile.INDEX_ENTRY_DTYPE
    assert consumequeue.CQ_UNIT_STRUCT.size == consumequeue.CQ_STORE_UNIT_SIZE
    assert indexfile.INDEX_HEADER_STRUCT.size == indexfile.INDEX_HEADER_SIZE
    assert indexfile.INDEX_ENTRY_STRUCT.size == indexfile.INDEX_ENTRY_DTYPE.itemsize
    assert indexfile.INDEX_ENTRY_STRUCT.size == indexfile.INDEX_SIZE


def test_no_second_unit_or_index_struct() -> None:
    """Only formats/consumequeue.py and formats/indexfile.py spell these layouts."""
    homes = {ROOT / "formats" / "consumequeue.py", ROOT / "formats" / "indexfile.py"}
    offenders = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for folder in ("formats", "mqtool")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in homes
        for m in _LAYOUTS.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
