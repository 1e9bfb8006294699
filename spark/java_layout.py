"""``RecordLayout.java``: the commitlog record layout (:mod:`mqtool.formats.commitlog_layout`) as
Java constants, for the Spark reader's record loop (``CommitlogDecoder.java``).

``python -m mqtool.spark.java_layout`` writes the file (``make spark-layout``; the jar build
depends on it); ``--check`` exits 1 when the file differs from what the table gives (a test runs
the same comparison).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mqtool.formats import commitlog_layout

JAVA_FILE = Path(__file__).resolve().parent / "java" / "mqtool" / "spark" / "RecordLayout.java"


def render() -> str:
    """The Java source for the layout table's constants."""
    lines = [
        "// Generated from formats/commitlog_layout.py by `make spark-layout`: do not edit.",
        "package mqtool.spark;",
        "",
        "/** The commitlog record layout: offsets from a record's first byte, widths in bytes,",
        " * and the magic codes and SYSFLAG bits that decide it (big-endian). */",
        "final class RecordLayout {",
        "    private RecordLayout() {",
        "    }",
        "",
    ]
    for name, value in commitlog_layout.java_constants():
        if "MAGIC_CODE" in name:
            text = f"0x{value & 0xFFFFFFFF:08X}"
        elif name.endswith("_FLAG"):
            text = f"0x{value:02X}"
        else:
            text = str(value)
        lines.append(f"    static final int {name} = {text};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv[1:] == ["--check"]:
        current = JAVA_FILE.read_text(encoding="utf-8") if JAVA_FILE.exists() else ""
        if current != text:
            print(f"{JAVA_FILE} is not what formats/commitlog_layout.py gives: "
                  "run make spark-layout", file=sys.stderr)
            return 1
        return 0
    JAVA_FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
