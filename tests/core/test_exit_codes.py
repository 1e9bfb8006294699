"""One exit-status table for every command: 0 ok, 1 findings, 2 usage, 3 environment.

Each status is provoked for every command it applies to: an unknown option and a store that is
not there (2), a damaged store and a lookup of what the store does not have (1), a store a
writer holds, a name server nobody answers on and
a scan without Java (3).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqtool.cli import app, command_paths

REPO = Path(__file__).resolve().parents[2]
JOURNEY = REPO / "fixtures" / "rocketmq-stores" / "4.9.7" / "journey" / "store"
ID = "C000020247AB5FFD2B276B8361EB0007"

#: Every command that reads a store given as STORE, with what else it needs.
READERS: dict[str, list[str]] = {
    "inspect": [], "messages": [], "cq": [], "msg": [ID], "index": [], "trace": [ID],
    "verify": [], "repair": ["--dry-run"], "dlq list": [], "dlq show": ["-g", "cg_journey"],
    "dlq export": ["-g", "cg_journey"],
    "dlq resend": ["-g", "cg_journey", "--target", "TARGET", "--dry-run"],
}
#: Every command that writes a reference store given as STORE.
WRITERS: dict[str, list[str]] = {
    "store init": [], "store produce": ["-t", "T"], "store consume": ["-g", "g", "-t", "T"],
    "store send-back": ["-g", "g", "--offset", "0"], "store tick": [], "store status": [],
}


def _invoke(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, args, env={"NO_COLOR": "1"})
    assert "Traceback" not in res.output, res.output
    return res.exit_code, res.output


def _args(cmd: str, store: Path, extra: list[str], tmp: Path) -> list[str]:
    return [*cmd.split(), str(store), *(str(tmp / "t") if a == "TARGET" else a for a in extra)]


def test_the_tables_name_every_command() -> None:
    named = set(READERS) | set(WRITERS) | {"demo", "serve", "scan"}
    assert named == {" ".join(p) for p in command_paths(app)}


@pytest.mark.parametrize("path", [" ".join(p) for p in command_paths(app)])
def test_an_unknown_option_is_usage(path: str) -> None:
    code, out = _invoke([*path.split(), "--no-such-option"])
    assert code == 2 and "No such option: --no-such-option" in out, out


@pytest.mark.parametrize("args", [["store", "produce", "{tmp}", "-t", "T", "--count", "0"],
                                  ["store", "produce", "{tmp}", "-t", "T", "--count", "-3"],
                                  ["demo", "{tmp}", "--messages", "-1"]], ids=" ".join)
def test_a_count_out_of_range_is_usage(args: list[str], tmp_path: Path) -> None:
    code, out = _invoke([a.format(tmp=tmp_path / "s") for a in args])
    assert code == 2 and "is not in the range x>=" in out, out
    assert not (tmp_path / "s").exists()  # refused before anything is written


@pytest.mark.parametrize("cmd", sorted(READERS) + ["scan"])
def test_a_store_that_is_not_there_is_usage(cmd: str, tmp_path: Path) -> None:
    code, out = _invoke(_args(cmd, tmp_path / "nowhere", READERS.get(cmd, []), tmp_path))
    assert code == 2, out
    assert f"{tmp_path / 'nowhere'}: no such directory" in out, out


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The journey store with its last record torn (zeros after its first 60 bytes)."""
    root = tmp_path_factory.mktemp("damaged") / "store"
    shutil.copytree(JOURNEY, root)
    last = root / "commitlog" / "00000000000000016384"
    data = bytearray(last.read_bytes())
    cut = 18754 - 16384 + 60
    data[cut:] = b"\x00" * (len(data) - cut)
    last.write_bytes(bytes(data))
    return root


#: What reads the torn record, where a command's plain form does not (index: the headers).
TORN = "C000020247AB5FFD2B276B839163000F"  # the torn record's UNIQ_KEY, KEYS j-late-0
TO_THE_DAMAGE = {"index": ["--key", "j-late-0"], "msg": [TORN], "trace": [TORN]}


@pytest.mark.parametrize("cmd", sorted(set(READERS) - {"repair"}))
def test_damage_is_findings(cmd: str, damaged: Path, tmp_path: Path) -> None:
    extra = TO_THE_DAMAGE.get(cmd, READERS[cmd])
    code, out = _invoke(_args(cmd, damaged, extra, tmp_path))
    assert code == 1, out
    assert "commitlog/00000000000000016384 @ 0x942" in out, out


#: A lookup of something the store does not have: an id, a key, a queue.
NOT_THERE = {
    "msg": ["0A0B0C0D0E0F10111213141516171819"],
    "trace": ["--key", "no-such-key"],
    "index": ["--key", "no-such-key"],
    "cq": ["NoSuchTopic"],
}


@pytest.mark.parametrize("cmd", sorted(NOT_THERE))
def test_what_is_not_there_is_findings(cmd: str) -> None:
    code, out = _invoke([cmd, str(JOURNEY), *NOT_THERE[cmd]])
    assert code == 1, out
    assert "no-such-key" in out or "NoSuchTopic" in out or NOT_THERE["msg"][0] in out, out
    assert "error:" in out, out


def test_an_index_lookup_that_finds_is_ok() -> None:
    code, out = _invoke(["index", str(JOURNEY), "--key", "j-always-0", "--json"])
    assert code == 0 and '"j-always-0"' in out, out


@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_a_store_a_writer_holds_is_environment(cmd: str, tmp_path: Path) -> None:
    from mqtool.refstore.engine import RefStore

    root = tmp_path / "store"
    with RefStore.open(root):  # this process holds it: the command's open is refused
        code, out = _invoke(_args(cmd, root, WRITERS[cmd], tmp_path))
    assert code == 3 and "already open for writing" in out, out


def test_a_name_server_nobody_answers_on_is_environment() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for args in (["dlq", "list"], ["dlq", "show", "-g", "g"], ["dlq", "export", "-g", "g"]):
        code, out = _invoke([*args, "--namesrv", f"127.0.0.1:{port}", "--timeout", "1"])
        assert code == 3 and "no name server reachable" in out, (args, out)
    code, out = _invoke(["dlq", "list", "--namesrv", "nohost"])
    assert code == 2 and "--namesrv" in out, out


@pytest.mark.slow
def test_a_scan_without_java_is_environment(tmp_path: Path) -> None:
    bare = tmp_path / "bin"  # the interpreter's own directory and the basic tools, no java
    bare.mkdir()
    for tool in ("sh", "bash", "uname", "dirname", "ps", "head", "cat", "rm", "mkdir"):
        where = shutil.which(tool)
        if where:
            (bare / tool).symlink_to(where)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(bare), NO_COLOR="1")
    run = subprocess.run([sys.executable, "-m", "mqtool", "scan", str(JOURNEY), "--master",
                          "local[1]"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 3, (run.returncode, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("error: Spark (--master local[1]) failed: "), run.stderr[-2000:]
    assert "Traceback" not in run.stderr


def test_repair_exits_1_only_for_damage_it_cannot_repair(damaged: Path) -> None:
    """Damage repair can undo is its job done (0); what it cannot repair is findings (1)."""
    code, out = _invoke(["repair", str(damaged), "--dry-run"])
    assert code == 0 and "commitlog/00000000000000016384 @ 0x942" in out, out
