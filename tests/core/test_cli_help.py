"""Every command has help with an example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from mqtool.cli import app


def _commands() -> list[list[str]]:
    root = get_command(app)
    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append(path)

    walk(root, [])
    return out


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
    assert res.exit_code == 1
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
    start = readme.index("The commands read:")
    listed = readme[start:readme.index("\n\n", start)]
    for kind in ("BatchConsumeQueue", "CQ-ext", "timerlog", "timerwheel"):
        assert kind not in listed, kind
    assert "No command reads these files yet." in readme
    assert "handles" not in readme.split("## Set up")[0]
