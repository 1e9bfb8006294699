"""bench/cli: how soon mqtool answers, as a user install runs it.

Usage (from the repo root):

    .venv/bin/python bench/cli/run.py               # 15 rounds of the short commands, 3 scans
    .venv/bin/python bench/cli/run.py --rounds 31 --scans 5

The wheel is built from this tree and installed into a virtual environment of its own
(``bench/out/cli/venv``: created with the wheel's dependencies on the first run; later runs
bring the dependencies to what the wheel asks for and reinstall mqtool), so that every process
starts as a user's does: no editable-install finder, no source tree on the path. Each command
runs from ``bench/out/cli`` with a cache directory of its own (``XDG_CACHE_HOME``), warm: every
command runs twice before the timed rounds (page cache, ``__pycache__``, numba's kernels, the
Spark jar).

Timed, interleaved (one of each per round, medians over the rounds):

- ``python -c pass`` with the venv's Python: the baseline every short command is divided by;
- ``mqtool --help``, ``mqtool inspect``, ``mqtool trace ID``, ``mqtool msg ID`` on the real
  RocketMQ 4.9.7 journey store (``fixtures/``). Their output goes to a pipe, as in a script
  or ``| grep``: plain rows (COLUMNS unset, as a shell leaves it for a command it starts);
- floors, each a bare import in the same Python: ``import typer`` (any command that parses
  its options with typer), the standard-library modules every short command imports
  (:data:`STDLIB`), and ``import numpy`` (``trace`` and ``msg`` check the records they read
  with verify's rules, which are written over numpy arrays);
- ``inspect``, ``trace ID`` and ``msg ID`` again with their output on a pseudo-terminal of 100
  columns, as an operator at a terminal runs them: rich's tables and colour;
- a bare local Spark session as a user would start one (``SparkSession.builder.master(...)
  .getOrCreate()``, one tiny job, default settings, same master) and ``mqtool scan`` of the
  journey store with the same master: the scan's figure is its wall time less the bare
  session's.

Targets (on the pipe): ``--help`` and ``inspect`` at most 3x ``python -c pass``, ``trace``
and ``msg`` at most 5x; the tiny-store scan at most the bare session + 1 s. The terminal
figures have no target of their own; they show what the tables cost. Prints a table and
writes ``bench/cli/last-run.json`` (see bench/figures.py).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import run_meta, write_last_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "bench" / "out" / "cli"
VENV = OUT / "venv"
JOURNEY = REPO / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
TRACE_ID = "C000020247AB5FFD2B276B8361EB0007"  # j-always-1: 8 records, original to DLQ
MASTER = "local[2]"
BARE_SESSION = (
    "from pyspark.sql import SparkSession\n"
    f"s = SparkSession.builder.master({MASTER!r}).getOrCreate()\n"
    "s.range(1).count()\n"
)


def _venv() -> tuple[Path, Path]:
    """The bench venv's python and mqtool, with this tree's wheel installed in it."""
    dist = OUT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
                   check=True, stdout=subprocess.DEVNULL)
    wheel = next(dist.glob("*.whl"))
    py = VENV / "bin" / "python"
    fresh = not py.exists()
    if fresh:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(VENV)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q"]
    subprocess.run([*pip, str(wheel)], check=True)  # the dependencies as the wheel pins them
    if not fresh:  # the same version number: mqtool itself again, from this tree's wheel
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(wheel)], check=True)
    return py, VENV / "bin" / "mqtool"


STDLIB = ("dataclasses", "enum", "json", "pathlib", "typing")
"""Standard-library modules that every short command imports (the library's records are
dataclasses; its modules use typing, enum, pathlib and json)."""
STDLIB_FLOOR = f"python -c 'import {', '.join(STDLIB)}'"

TTY = " (terminal)"
"""Suffix of a case whose stdout is a pseudo-terminal (:func:`_run_tty`)."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MQTOOL_SPARK_CDS", "COLUMNS", "LINES",
                        "NO_COLOR", "FORCE_COLOR", "PYTHONDONTWRITEBYTECODE")}
    env.update(XDG_CACHE_HOME=str(OUT / "cache"))
    return env


def _run(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    res = subprocess.run(cmd, cwd=OUT, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {res.returncode}: "
                         f"{res.stderr.decode(errors='replace')[-2000:]}")
    return wall


def _run_tty(cmd: list[str], env: dict[str, str]) -> float:
    """Wall time of ``cmd`` with its stdout on a pseudo-terminal of 40 x 100 (read to the
    end as a terminal would)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=OUT, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    while True:
        try:
            if not os.read(master, 1 << 16):
                break
        except OSError:  # EIO: the terminal's last writer is gone
            break
    err = proc.stderr.read() if proc.stderr else b""
    code = proc.wait()
    wall = time.perf_counter() - t
    os.close(master)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} (terminal): exit {code}: "
                         f"{err.decode(errors='replace')[-2000:]}")
    return wall


def _timed(cases: dict[str, list[str]], rounds: int, warm: int,
           env: dict[str, str]) -> dict[str, list[float]]:
    def run(name: str, cmd: list[str]) -> float:
        return _run_tty(cmd, env) if name.endswith(TTY) else _run(cmd, env)

    for _ in range(warm):
        for name, cmd in cases.items():
            run(name, cmd)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, cmd in cases.items():
            times[name].append(run(name, cmd))
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="rounds of the short commands")
    ap.add_argument("--scans", type=int, default=3, help="rounds of the bare session and scan")
    args = ap.parse_args()
    meta = run_meta()
    OUT.mkdir(parents=True, exist_ok=True)
    py, mqtool = _venv()
    env = _env()
    short = {
        "python -c pass": [str(py), "-c", "pass"],
        "mqtool --help": [str(mqtool), "--help"],
        "mqtool inspect STORE": [str(mqtool), "inspect", str(JOURNEY)],
        "mqtool trace STORE ID": [str(mqtool), "trace", str(JOURNEY), TRACE_ID],
        "mqtool msg STORE ID": [str(mqtool), "msg", str(JOURNEY), TRACE_ID],
        "python -c 'import typer'": [str(py), "-c", "import typer"],
        STDLIB_FLOOR: [str(py), "-c", "import " + ", ".join(STDLIB)],
        "python -c 'import numpy'": [str(py), "-c", "import numpy"],
    }
    for name in ("mqtool inspect STORE", "mqtool trace STORE ID", "mqtool msg STORE ID"):
        short[name + TTY] = short[name]
    spark = {
        "bare local Spark session": [str(py), "-c", BARE_SESSION],
        "mqtool scan STORE": [str(mqtool), "scan", str(JOURNEY), "--master", MASTER],
    }
    t0 = time.perf_counter()
    st = _timed(short, args.rounds, 2, env)
    sp = _timed(spark, args.scans, 1, env)
    med = {k: statistics.median(v) for k, v in {**st, **sp}.items()}
    base = med["python -c pass"]
    limits = {"mqtool --help": 3, "mqtool inspect STORE": 3, "mqtool trace STORE ID": 5,
              "mqtool msg STORE ID": 5}
    figures = []
    for name in short:
        figures.append({"what": name + (f" (target <= {limits[name]}x)" if name in limits
                                        else ""),
                        "value": round(med[name] * 1000, 1), "unit": "ms",
                        "ratio": round(med[name] / base, 2)})
    bare, scan = med["bare local Spark session"], med["mqtool scan STORE"]
    figures += [
        {"what": f"bare local Spark session ({MASTER}, start and one job)",
         "value": round(bare, 2), "unit": "s", "ratio": None},
        {"what": f"mqtool scan of the journey store ({MASTER}, every audit)",
         "value": round(scan, 2), "unit": "s", "ratio": None},
        {"what": "mqtool scan less the bare session (target <= 1 s)",
         "value": round(scan - bare, 2), "unit": "s", "ratio": None},
    ]
    met = {name: med[name] / base <= limit for name, limit in limits.items()}
    met["scan"] = scan - bare <= 1.0
    verdict = "; ".join(f"{n}: {'met' if ok else 'NOT met'}" for n, ok in met.items())
    write_last_run("cli", meta, {
        "size": "small",
        "params": {"rounds": args.rounds, "scans": args.scans, "master": MASTER,
                   "store": str(JOURNEY.relative_to(REPO)), "traceId": TRACE_ID,
                   "seconds": round(time.perf_counter() - t0, 1)},
        "baseline": "python -c pass (the same venv's Python, median, same run)",
        "figures": figures,
        "msRuns": {k: [round(x * 1000, 1) for x in v] for k, v in {**st, **sp}.items()},
        "targets": {"met": met, "limits": limits, "scanOverBareSeconds": round(scan - bare, 2)},
        "notes": [
            "Each process is started from a wheel installed in a virtual environment of its "
            "own (no editable install), warm, with the commands interleaved round by round; "
            "medians. Output goes to a pipe (plain rows; the targets are measured there), and "
            f"for the rows marked{TTY} to a pseudo-terminal of 100 columns (rich's tables and "
            "colour, what an operator at a terminal sees). `python -c 'import typer'` is the "
            "floor of any command that parses its options with typer; --help is printed "
            "without typer, and the common forms of inspect, trace and msg run without it. "
            f"`{STDLIB_FLOOR}` is the floor of the standard library every short command "
            "imports; `python -c 'import numpy'` that of trace and msg, whose record checks "
            "are verify's rules over numpy arrays.",
            f"Targets in this run: {verdict}.",
        ],
    })
    print(f"{'what':<64}{'median':>12}{'x pass':>9}")
    for f in figures:
        ratio = "" if f["ratio"] is None else f"{f['ratio']:>9}"
        print(f"{f['what']:<64}{f['value']:>10} {f['unit']:<2}{ratio}")
    print(verdict)


if __name__ == "__main__":
    main()
