"""Dependencies point one way: mqtool.spark -> mqtool -> mqtool.formats."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout
    return set(out.split())


def test_formats_imports_nothing_else_of_the_project() -> None:
    mods = _modules_after(
        "import mqtool.formats, mqtool.formats.commitlog, mqtool.formats.consumequeue, "
        "mqtool.formats.indexfile, mqtool.formats.msgid, mqtool.formats.config, "
        "mqtool.formats.checkpoint, mqtool.formats.timer"
    )
    assert not {m for m in mods if m.split(".")[0] in ("rich", "pyspark", "typer", "pyarrow")}
    project = {m for m in mods if m.startswith("mqtool")}
    assert project <= {m for m in project if m == "mqtool" or m.startswith("mqtool.formats")}


def test_cli_help_does_not_import_pyspark() -> None:
    mods = _modules_after(
        "import sys; sys.argv=['mqtool','--help']\n"
        "from mqtool.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass"
    )
    assert "pyspark" not in mods
    assert "mqtool.cli" in mods


def test_python_dash_m_runs() -> None:
    res = subprocess.run([sys.executable, "-m", "mqtool", "--help"], capture_output=True,
                         text=True)
    assert res.returncode == 0
    assert "inspect" in res.stdout
