"""``mqtool --help`` as typer prints it on a terminal 80 columns wide or wider.

:mod:`mqtool.__main__` prints it without importing typer. Written by
``python -m mqtool.tophelp`` from the typer app; ``tests/core/test_cli_help.py`` checks that
it still equals what the app prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

TOP_HELP = (
    'Usage: mqtool [OPTIONS] COMMAND [ARGS]...\n'
    '\n'
    '  Inspect, trace, verify, repair and audit Apache RocketMQ message stores\n'
    '  offline; resend dead-lettered messages into a store directory or a live\n'
    '  cluster.\n'
    '\n'
    'Options:\n'
    "  --version             Print mqtool's version and exit.\n"
    '  --no-color            No colour in any output (as NO_COLOR=1 does).\n'
    '  --install-completion  Install completion for the current shell.\n'
    '  --show-completion     Show completion for the current shell, to copy it or\n'
    '                        customize the installation.\n'
    '  -h, --help            Show this message and exit.\n'
    '\n'
    'Commands:\n'
    '  inspect   Overview of a store: state, files, queues, delay levels, groups.\n'
    '  messages  List messages in commitlog (physical) order, with filters.\n'
    '  cq        Consume-queue units (20 bytes each) of every queue, or of one.\n'
    '  msg       Every message an offsetMsgId, UNIQ_KEY or offset names.\n'
    '  index     Index files: headers, or the messages a key finds.\n'
    "  trace     One message's journey: original, schedule, retry, DLQ, resend.\n"
    "  verify    Check a store's integrity; say what a restart would lose.\n"
    "  repair    Write a repaired copy: what RocketMQ's recovery would leave.\n"
    '  demo      Build a demo store with retries and DLQs; say what to try next.\n'
    '  serve     A name server and a broker in one process, over a store.\n'
    '  scan      Audit whole stores with Spark: queues, DLQs, retries, lag,...\n'
    '  dlq       Dead-letter queues: list, show, export and resend their records.\n'
    '  store     Create and feed a reference store: produce, consume, tick.\n'
    '\n'
    '  Exit status: 0 ok; 1 findings (damage, or what was asked for is not there);\n'
    '  2 usage (a bad option, value or path); 3 environment (no Java, a cluster\n'
    '  that cannot be reached, a store a broker holds, a full disk).\n'
)


def render() -> str:
    """What the typer app prints for ``mqtool --help`` at 80 columns (in a process of its own:
    click's test runner formats help wider than a terminal does)."""
    import os
    import subprocess

    run = subprocess.run(
        [sys.executable, "-c", "import sys; from mqtool.cli import main; "
         "sys.argv = ['mqtool', '--help']; main()"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"},
    )
    return run.stdout


def main() -> int:
    """Rewrite :data:`TOP_HELP` in this file from the app."""
    path = Path(__file__)
    text = path.read_text(encoding="utf-8")
    start = text.index('TOP_HELP = ')
    end = text.index("\n\n\ndef render", start)
    lines = "".join(f"    {line!r}\n" for line in render().splitlines(keepends=True))
    path.write_text(text[:start] + f"TOP_HELP = (\n{lines})" + text[end:], encoding="utf-8")
    print(f"updated {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
