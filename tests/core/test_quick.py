"""The quick forms of ``inspect``, ``msg`` and ``trace`` (run without typer,
:mod:`mqtool.cli.quick`) print what the typer commands print, byte for byte, and end with the
same exit status: on real RocketMQ stores, on damaged copies, and on paths that are no store.
Each command line runs twice as a user runs it (``python -m mqtool``, stdout and stderr piped):
as it is, and with ``MQTOOL_NO_QUICK=1`` (typer parses it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import store_dir

JOURNEY = "4.9.7/journey"
ID = "C000020247AB5FFD2B276B8361EB0007"  # j-always-1: original to DLQ
OFFSET_MSG_ID = "C0A8010A00002A9F0000000000004355"  # its DLQ copy
HEAVY = ("typer", "click", "rich", "numba", "pyspark")
WATCHED = (*HEAVY, "numpy")  # numpy: only where a store is large

RUN = (
    "import atexit, os, sys\n"
    "def heavy():\n"
    f"    got = sorted({{m.split('.')[0] for m in sys.modules}} & set({WATCHED!r}))\n"
    "    with open(os.environ['MQTOOL_TEST_MODULES'], 'w') as f:\n"
    "        f.write(' '.join(got))\n"
    "atexit.register(heavy)\n"
    "sys.argv = ['mqtool', *sys.argv[1:]]\n"
    "from mqtool.__main__ import main\n"
    "main()\n"
)


def _run(args: list[str], tmp: Path, quick: bool,
         columns: str | None = None) -> tuple[int, str, str, list[str]]:
    mods = tmp / "modules.txt"
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "FORCE_COLOR", "MQTOOL_NO_QUICK")}
    env["MQTOOL_TEST_MODULES"] = str(mods)
    if not quick:
        env["MQTOOL_NO_QUICK"] = "1"
    if columns:  # tables drawn by rich at that width, in a pipe too
        env["COLUMNS"] = columns
    res = subprocess.run([sys.executable, "-c", RUN, *args], env=env, capture_output=True,
                         text=True, check=False, timeout=300)
    return res.returncode, res.stdout, res.stderr, mods.read_text().split()


def _same(args: list[str], tmp: Path,
          columns: str | None = None) -> tuple[int, str, str, list[str]]:
    """Run ``args`` both ways; assert the same output and status; the quick run's result and
    the watched modules it loaded."""
    q = _run(args, tmp, True, columns)
    t = _run(args, tmp, False, columns)
    assert q[:3] == t[:3], f"mqtool {' '.join(args)}: quick {q[:3]!r} != typer {t[:3]!r}"
    assert "typer" in t[3]  # the typer run did parse with typer
    return q


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The journey store, damaged copies of it, and paths that are no store."""
    base = tmp_path_factory.mktemp("quick")
    out = {"journey": store_dir(JOURNEY), "crashed": store_dir("4.9.7/plain-crashed")}
    bad = base / "bad-magic"  # no index, the second file's first record without its magic
    shutil.copytree(store_dir(JOURNEY), bad)
    shutil.rmtree(bad / "index")
    p = bad / "commitlog" / "00000000000000004096"
    data = bytearray(p.read_bytes())
    data[4:8] = bytes(4)
    p.write_bytes(bytes(data))
    out["bad-magic"] = bad
    idx = base / "bad-index"  # an index file whose body is garbage
    shutil.copytree(store_dir(JOURNEY), idx)
    [ix] = sorted((idx / "index").iterdir())
    raw = bytearray(ix.read_bytes())
    raw[40:4000] = b"\xff" * (4000 - 40)
    ix.write_bytes(bytes(raw))
    out["bad-index"] = idx
    empty = base / "empty"
    empty.mkdir()
    out["empty"] = empty
    out["missing"] = base / "no-such-dir"
    out["commitlog"] = store_dir(JOURNEY) / "commitlog"
    out["file"] = store_dir(JOURNEY) / "checkpoint"
    return out


FORMS = [
    ["inspect", "{s}"],
    ["inspect", "{s}", "--json"],
    ["msg", "{s}", ID],
    ["msg", "{s}", "--json", OFFSET_MSG_ID],
    ["msg", "{s}", "1785"],
    ["msg", "{s}", "C000020247AB5FFD2B276B8361EBFFFF"],  # no such message: exit 1
    ["trace", "{s}", ID],
    ["trace", "{s}", ID, "--json"],
    ["trace", "{s}", "C000020247AB5FFD2B276B8361EBFFFF"],
]


@pytest.mark.parametrize("store", ["journey", "crashed", "bad-magic", "bad-index", "empty",
                                   "missing", "commitlog", "file"])
def test_quick_forms_print_what_typer_prints(stores: dict[str, Path], store: str,
                                             tmp_path: Path) -> None:
    statuses = set()
    for form in FORMS:
        args = [a.format(s=stores[store]) for a in form]
        status, out, err, loaded = _same(args, tmp_path)
        heavy = [m for m in loaded if m in HEAVY]
        assert heavy == [], f"mqtool {' '.join(args)} loaded {heavy}"
        assert "Traceback" not in err
        statuses.add(status)
    if store == "journey":
        assert statuses == {0, 1}  # found, and not found
    elif store in ("bad-magic", "bad-index"):
        assert 1 in statuses  # the damage is reported
    elif store in ("empty", "missing", "commitlog", "file"):
        assert statuses - {0, 1}  # no store: a usage error


def test_other_forms_go_to_typer_with_the_same_result(stores: dict[str, Path],
                                                      tmp_path: Path) -> None:
    s = str(stores["journey"])
    for args in (["msg", s, "not-an-id"],  # refused by typer: exit 2
                 ["inspect", s, "--json", "--json"],
                 ["inspect", "--help"],
                 ["trace", s, "--key", "j-always-1"],
                 ["inspect", s, "extra"]):
        status, _out, _err, heavy = _same(args, tmp_path)
        assert "typer" in heavy
        if args[2:] == ["not-an-id"] or args[-1] == "extra":
            assert status == 2


def test_with_columns_set_rich_draws_both(stores: dict[str, Path], tmp_path: Path) -> None:
    """COLUMNS set: tables are drawn at that width in a pipe too, by rich, both ways."""
    for form in FORMS[:3] + FORMS[6:7]:
        args = [a.format(s=stores["journey"]) for a in form]
        status, out, _err, heavy = _same(args, tmp_path, columns="100")
        assert status == 0
        assert "typer" not in heavy and "numba" not in heavy
        if args[0] != "trace" and "--json" not in args:  # (trace's resend line stays whole)
            assert max(len(ln) for ln in out.splitlines()) <= 100


def test_inspect_of_a_small_store_imports_no_numpy(stores: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """The checks of every read run over Python lists on a store this small (numpy only
    where a file is large): ``inspect`` of the journey store loads no numpy."""
    s = str(stores["journey"])
    for args in (["inspect", s], ["inspect", s, "--json"]):
        status, out, _err, loaded = _run(args, tmp_path, True)
        assert status == 0 and out
        assert "numpy" not in loaded, f"mqtool {' '.join(args)} loaded {loaded}"
