"""Every command has help with an example."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from mqtool.cli import app


def _commands() -> list[list[str]]:
    from mqtool.cli import app, command_paths

    return command_paths(app)


def test_every_command_has_help_with_an_example() -> None:
    cmds = _commands()
    assert {"inspect", "messages", "cq", "msg", "index"} <= {c[0] for c in cmds}
    runner = CliRunner()
    for path in cmds:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, path
        assert "Example" in res.stdout or "example" in res.stdout, f"no example in {path}"


def test_bad_store_path_is_one_clear_line() -> None:
    res = CliRunner().invoke(app, ["inspect", "/nonexistent/store"])
    assert res.exit_code == 2
    assert "no such directory" in res.output
    assert "Traceback" not in res.output


# --- claims: what mqtool says about itself names only what exists ----------------------------
REPO = Path(__file__).resolve().parents[2]


def _top_level() -> set[str]:
    return set(getattr(get_command(app), "commands", {}))


def _claims() -> dict[str, str]:
    """Every place mqtool describes itself in one line."""
    import tomllib

    import mqtool

    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        "mqtool --help": CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout,
        "mqtool/__init__.py": mqtool.__doc__ or "",
        "pyproject description": meta["description"],
    }


@pytest.mark.parametrize("verb", ["repair", "verify", "serve"])
def test_one_line_descriptions_promise_only_existing_commands(verb: str) -> None:
    """`--help`, the package docstring and the description name a verb only once it exists."""
    for where, text in _claims().items():
        if re.search(rf"\b{verb}\b", text, re.IGNORECASE):
            assert verb in _top_level(), f"{where} promises {verb!r}, which is not a command"


def test_readme_names_only_existing_commands_and_files() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`mqtool ([a-z][a-z-]*)", readme))
    assert named, "the README names no command"
    assert named <= _top_level(), named - _top_level()
    # every repository path the README names in backticks exists (bench scripts included)
    paths = set(re.findall(r"`((?:bench|formats|mqtool|spark|tests|fixtures|docs|\.ci)/[^`*<> ]+)`",
                           readme))
    missing = sorted(p for p in paths if not (REPO / p.rstrip("/")).exists())
    assert not missing, missing


def test_readme_and_ci_agree_on_the_check_commands() -> None:
    """CI runs exactly the README's lint, typecheck and test commands."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_cmds = [ln.strip() for ln in ci.splitlines() if ln.strip().startswith("make ")]
    assert ci_cmds == ["make lint", "make typecheck", "make test"]
    for cmd in ci_cmds:
        assert f"{cmd} " in readme or f"{cmd}\n" in readme, cmd


def test_readme_claims_no_file_kind_a_command_does_not_read() -> None:
    """The README lists what the commands read; library-only formats are said to be so."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("The commands read:\n\n") + len("The commands read:\n\n")
    listed = readme[start:readme.index("\n\n", start)]
    assert "CQ-ext" not in listed
    assert "(`batchconsumequeue/`)" in listed  # cq, inspect, verify read batch queue units
    assert "`timerlog/`, `timerwheel`" in listed  # verify reads them (mqtool/integrity/timer.py)
    assert "No command reads these files yet." in readme
    assert "handles" not in readme.split("## Set up")[0]


# --- CLI details ------------------------------------------------------------------------------
FIXTURES = REPO / "fixtures" / "rocketmq-stores"
JOURNEY = FIXTURES / "4.9.7" / "journey" / "store"


def test_help_is_plain_text_and_values_say_what_they_take() -> None:
    """Plain (click) help: no boxes, no escapes; a flag shows no value, an option its value."""
    runner = CliRunner()
    for path in [[], *_commands()]:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert res.exit_code == 0, path
        assert not set(res.stdout) & set("│╭╮╰╯─\x1b"), path
    res = runner.invoke(app, ["messages", "--help"], env={"COLUMNS": "80"})
    assert re.search(r"^  --json +Print", res.stdout, re.MULTILINE)
    assert re.search(r"^  --limit <int range> +Stop", res.stdout, re.MULTILINE)


def test_examples_are_whole_lines_in_the_help() -> None:
    """Every `Example:` of a command's docstring is one line of its help at 80 columns, so it
    can be copied; other paragraphs are wrapped to the terminal."""
    import inspect as pyinspect

    checked = 0
    for path in _commands():
        cmd: object = get_command(app)
        for name in path:
            cmd = getattr(cmd, "commands", {})[name]
        doc = pyinspect.cleandoc(getattr(cmd, "help", None) or "")
        lines = {ln.strip() for ln in _help_at_80(path).splitlines()}
        for ex in re.findall(r"^Examples?: .*$", doc, re.MULTILINE):
            assert ex in lines, (path, ex)
            checked += 1
    assert checked >= len(_commands())


def _help_at_80(path: list[str]) -> str:
    """The help a terminal 80 columns wide shows (click's test runner formats wider)."""
    run = subprocess.run([sys.executable, "-m", "mqtool", *path, "--help"],
                         env={**os.environ, "COLUMNS": "80"}, capture_output=True, text=True,
                         check=True)
    return run.stdout


def test_reflow_marks_lists_and_examples_for_click() -> None:
    from mqtool.cli.helptext import reflow

    assert reflow("First line.\n\nOne sentence\nthat goes on.\n\n- item one\n- item two") == \
        "First line.\n\nOne sentence that goes on.\n\n\b\n- item one\n- item two"
    assert reflow("Examples follow.\n\nExample: mqtool a\nExample: mqtool b --flag c") == \
        "Examples follow.\n\n\b\nExample: mqtool a\nExample: mqtool b --flag c"


def test_top_level_help_without_typer_is_typers() -> None:
    """`mqtool --help` is printed from mqtool.tophelp without importing typer; it is what the
    typer app prints (regenerate with `python -m mqtool.tophelp`)."""
    from mqtool.tophelp import TOP_HELP, render

    assert TOP_HELP == render(), "run `.venv/bin/python -m mqtool.tophelp`"
    fast = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqtool", "--help"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "100"})
    assert fast.returncode == 0 and fast.stdout == TOP_HELP
    assert "typer" not in fast.stderr  # -X importtime lists every module imported
    bare = subprocess.run([sys.executable, "-m", "mqtool"], capture_output=True, text=True)
    assert bare.returncode == 2 and bare.stderr == TOP_HELP and not bare.stdout
    narrow = subprocess.run([sys.executable, "-m", "mqtool", "--help"], capture_output=True,
                            text=True, env={**os.environ, "COLUMNS": "60"})
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 60


def test_version() -> None:
    from mqtool import __version__

    for args in (["--version"], ["--no-color", "--version"]):
        run = subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                             text=True)
        assert run.returncode == 0 and run.stdout == f"mqtool {__version__}\n", args
    assert CliRunner().invoke(app, ["--version"]).stdout == f"mqtool {__version__}\n"


def test_no_color_and_NO_COLOR() -> None:  # noqa: N802 - the variable's name
    """Colour only on a terminal (FORCE_COLOR stands for one here); NO_COLOR=1 or --no-color
    turn it off there."""
    args = ["trace", str(JOURNEY), "--key", "j-dlq-0"]
    colour = re.compile(r"\x1b\[[0-9;]*3[0-9]m|\x1b\[[0-9;]*38;")

    def run(*extra: str, **env: str) -> str:
        r = subprocess.run([sys.executable, "-m", "mqtool", *extra, *args], capture_output=True,
                           text=True, env={**os.environ, "FORCE_COLOR": "1", **env})
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert colour.search(run())
    assert not colour.search(run(NO_COLOR="1"))
    assert not colour.search(run("--no-color"))


def test_shell_completion_is_offered_and_completes() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert "--install-completion" in res.stdout and "--show-completion" in res.stdout
    for words, cword, want in (("mqtool ins", "1", "inspect"), ("mqtool dlq re", "2", "resend")):
        run = subprocess.run([sys.executable, "-m", "mqtool"], capture_output=True, text=True,
                             env={**os.environ, "_MQTOOL_COMPLETE": "complete_bash",
                                  "COMP_WORDS": words, "COMP_CWORD": cword})
        assert run.returncode == 0 and run.stdout.split() == [want], (words, run)


def test_piped_tables_keep_ids_and_topic_names_whole() -> None:
    """stdout not a terminal and no COLUMNS: no cell is wrapped, whatever its length."""
    env = {"COLUMNS": None, "NO_COLOR": "1"}
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--limit", "5"], env=env)
    assert res.exit_code == 0, res.output
    uniq = re.findall(r"\b[0-9A-F]{32}\b", res.stdout)
    assert len(uniq) == 5, res.stdout
    store = FIXTURES / "5.3.3" / "plain" / "store"
    res = CliRunner().invoke(app, ["inspect", str(store)], env=env)
    assert res.exit_code == 0, res.output
    long_topic = "LongTopic-" + "abcdefghij" * 14
    assert any(long_topic in ln for ln in res.stdout.splitlines()), res.stdout[:2000]
    # COLUMNS, when set, is still honoured
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--limit", "5"],
                             env={"COLUMNS": "60", "NO_COLOR": "1"})
    assert max(map(len, res.stdout.splitlines())) <= 60


def test_trace_without_id_or_key_says_what_to_give() -> None:
    res = CliRunner().invoke(app, ["trace", str(JOURNEY)], env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert "give the message to trace: ID or --key KEY" in res.output
    assert "not both" not in res.output
    res = CliRunner().invoke(app, ["trace", str(JOURNEY), "ABC", "--key", "k"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "not both" in res.output


@pytest.mark.parametrize("args", [
    ["messages", str(JOURNEY)],
    ["dlq", "show", str(JOURNEY), "--group", "cg_journey"],
    ["dlq", "export", str(JOURNEY), "--group", "cg_journey"],
    ["dlq", "resend", str(JOURNEY), "--group", "cg_journey", "--target", "/nonexistent/t",
     "--dry-run"],
])
@pytest.mark.parametrize("limit", ["-1", "0"])
def test_limit_below_one_is_rejected(args: list[str], limit: str) -> None:
    res = CliRunner().invoke(app, [*args, "--limit", limit], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "--limit" in res.output


def test_queue_without_topic_is_rejected() -> None:
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--queue", "1"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert "--queue needs --topic" in res.output
    res = CliRunner().invoke(app, ["messages", str(JOURNEY), "--queue", "1", "--topic",
                                   "JourneyTopic", "--json"])
    assert res.exit_code == 0 and {m["queueId"] for m in json.loads(res.stdout)} == {1}


def test_body_utf8_never_replaces_bytes_while_saying_utf8() -> None:
    """A body that is not UTF-8 comes back as base64 of the stored bytes, labelled base64."""
    import base64

    from mqtool.jsonview import encode_bytes

    assert encode_bytes("é".encode(), "utf8") == ("é", "utf8")
    assert encode_bytes(b"\xff\xfe", "utf8") == (base64.b64encode(b"\xff\xfe").decode(), "base64")
    store = FIXTURES / "4.9.7" / "plain" / "store"
    res = CliRunner().invoke(app, ["messages", str(store), "--jsonl", "--body", "utf8"])
    assert res.exit_code == 0
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    b64 = [r for r in rows if r["bodyEncoding"] == "base64"]
    assert b64, "the fixture has bodies that are not UTF-8"
    assert all("\ufffd" not in r["body"] for r in rows)
    res = CliRunner().invoke(app, ["messages", str(store), "--jsonl", "--body", "base64"])
    stored = {json.loads(ln)["commitLogOffset"]: json.loads(ln)["body"]
              for ln in res.stdout.splitlines()}
    for r in b64:
        assert r["body"] == stored[r["commitLogOffset"]]
    for r in rows:
        if r["bodyEncoding"] == "utf8" and not r["compressionType"]:
            assert base64.b64encode(r["body"].encode()).decode() == stored[r["commitLogOffset"]]


@pytest.mark.slow
def test_editable_install_prints_no_same_name_folder_warning(tmp_path: Path) -> None:
    """`make dev`'s editable install of this layout (formats/ mapped to mqtool.formats) does not
    print setuptools' 'folders with the same name as your package' warning."""
    import os
    import subprocess
    import sys

    make = (REPO / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^EDITABLE_QUIET := (\w+)=(\S+)$", make, re.MULTILINE)
    assert m, "Makefile defines EDITABLE_QUIET"
    assert "$(EDITABLE_QUIET) $(BIN)/python -m pip install" in make
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = dict(os.environ, **{m[1]: m[2]})
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-deps", "-q", "-e", str(REPO)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = " ".join(proc.stderr.split())  # the warning is wrapped over several lines
    assert "Please be careful with folders" not in said, proc.stderr[-2000:]
    assert "same name as your package" not in said, proc.stderr[-2000:]
    check = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import mqtool.formats; print(mqtool.formats.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=False)
    assert check.returncode == 0 and str(REPO / "formats") in check.stdout, check.stderr
