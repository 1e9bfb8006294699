"""Every command has help with an example."""

from __future__ import annotations

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
