"""The README's examples run, and print what the README shows.

The main job (`make demo`): every ``$ mqtool ...`` of that section runs in the order shown, in a
scratch directory, on the demo store ``mqtool demo`` writes (the same every run); each line the
README shows after a command must be printed (stdout, then stderr), in that order and adjacent,
except where a ``...`` line leaves lines out. ``<now>`` stands for a time the resend writes with
the machine's clock, ``<gap>`` for a ``(+...)`` gap to it and ``<seconds>`` for a duration.

The serve section's Python client example runs against ``mqtool serve`` with the real C++-core
client (PyPI ``rocketmq`` 0.4.4, ``make peers``) and prints what its comment says.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
MARKERS = {
    "<now>": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}",
    "<gap>": r"\(\+[^)]*\)",
    "<seconds>": r"[0-9.]+",
}


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n### ", start + len(title))
    return README[start:end]


def _examples(text: str) -> list[tuple[str, list[str]]]:
    """(command line, the lines shown after it) for every ``$ mqtool`` in the fenced blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ mqtool "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def _pattern(line: str) -> re.Pattern[str]:
    parts = re.split("(" + "|".join(map(re.escape, MARKERS)) + ")", line.rstrip())
    return re.compile("".join(MARKERS.get(p, re.escape(p)) for p in parts))


def _check(cmd: str, shown: list[str], printed: list[str]) -> None:
    """Each shown line matches the printed line after the previous match (any after a ``...``);
    the first one the first line printed unless ``...`` comes first."""
    i, free = 0, False
    for line in shown:
        if not line.strip():
            continue
        if line.strip() == "...":
            free = True
            continue
        pat = _pattern(line)
        if free:
            while i < len(printed) and not pat.fullmatch(printed[i]):
                i += 1
        assert i < len(printed) and pat.fullmatch(printed[i]), (
            f"README: `{cmd}` shows\n  {line}\nbut printed there:\n  "
            + "\n  ".join(printed[max(0, i - 2):i + 3]))
        i += 1
        free = False


@pytest.mark.slow
def test_the_main_job_examples_print_what_the_readme_shows(tmp_path: Path) -> None:
    examples = _examples(_section("### The main job: `make demo`"))
    assert [c.split()[1] for c, _ in examples][:2] == ["demo", "trace"], examples
    assert sum(c.startswith("mqtool scan") for c, _ in examples) == 1
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env.update(NO_COLOR="1", XDG_STATE_HOME=str(tmp_path / "state"))
    for cmd, shown in examples:
        assert f"$(BIN)/{cmd.replace('demo-store', '$(DEMO)')}" in make, (
            f"make demo does not run `{cmd}`")
        args = shlex.split(cmd)[1:]
        if args[0] == "scan":
            args += ["--master", "local[2]"]
        run = subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, (cmd, run.stdout[-2000:], run.stderr[-2000:])
        printed = [ln.rstrip() for ln in (run.stdout + run.stderr).splitlines()]
        _check(cmd, shown, printed)


def test_the_checker_reads_markers_and_gaps() -> None:
    _check("x", ["a", "...", "c <now> d", "e"], ["a", "b", "c 2026-11-27 08:52:42.928 d", "e"])
    with pytest.raises(AssertionError):
        _check("x", ["a", "c"], ["a", "b", "c"])  # not adjacent without "..."
    with pytest.raises(AssertionError):
        _check("x", ["b"], ["a", "b"])  # the first line shown is the first printed


@pytest.mark.slow
def test_the_serve_python_client_example_prints_its_comment(tmp_path: Path) -> None:
    """The README's C++-core client snippet, against `mqtool serve` on free ports."""
    block = re.search(r"^```python\n(.*?)^```", _section("### `mqtool serve`"),
                      re.MULTILINE | re.DOTALL)
    assert block, "the serve section has a Python example"
    code = block.group(1)
    said = re.search(r"print\((.*)\)\s+# (.+)$", code, re.MULTILINE)
    assert said, "the example prints something and says what in a comment"
    python = REPO / "build" / "peers" / "cpp" / "bin" / "python"
    assert python.exists(), "make peers installs the C++-core client (build/peers/cpp)"
    srv = subprocess.Popen(  # any free ports; the ready line names them
        [sys.executable, "-m", "mqtool", "serve", str(tmp_path / "store"), "--namesrv-port",
         "0", "--broker-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        ready = re.search(r"ready namesrv (\S+) ", srv.stdout.readline())
        assert ready, "mqtool serve says where it listens"
        run = subprocess.run([str(python), "-c", code.replace("127.0.0.1:9876", ready[1])],
                             cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip().splitlines()[-1] == said.group(2).split()[0]
    finally:
        srv.terminate()
        srv.wait(timeout=60)
