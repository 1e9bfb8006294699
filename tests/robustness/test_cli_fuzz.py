"""A few hundred randomly damaged stores through the CLI, in-process.

One private copy per store; each case damages one file (bit flips, hostile integers, truncation,
zero fill, garbage, emptied), runs one read command and restores the file. Whatever the damage,
no exception may escape the command, stderr holds only one-line ``error:``/``warning:``
messages, and a failure exit always comes with a message. Seeded: reproducible.
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

from robust_harness import FUZZ_SCALE, STORES, assert_no_crash, run_inproc

CASES = int(200 * FUZZ_SCALE)
COMMANDS = [
    ["inspect", "--json"], ["inspect"], ["messages", "--jsonl"], ["messages", "--json"],
    ["messages", "--jsonl", "--body", "utf8"], ["messages", "--topic", "JourneyTopic"],
    ["cq", "--jsonl"], ["cq", "--json"], ["index", "--json"],
    ["index", "--key", "order-0", "--json"], ["msg", "{off}", "--json"], ["msg", "{off}"],
]
HOSTILE = [0, -1, 2**31 - 1, -(2**31), 1, 91, 20, 0x7FFF, 0xFFFF]


def _mutate(rng: random.Random, data: bytearray) -> tuple[bytearray, int]:
    """A damaged copy of ``data`` and the position of the damage."""
    if not data:
        return bytearray(rng.randbytes(rng.randint(1, 64))), 0
    i = rng.randrange(len(data))
    op = rng.choice(["flip", "int32", "trunc", "zero", "junk", "empty", "flip"])
    if op == "flip":
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(max(1, min(len(data), i + 256) - i)) + i
            data[min(j, len(data) - 1)] ^= 1 << rng.randrange(8)
    elif op == "int32":
        data[i : i + 4] = struct.pack(">i", rng.choice(HOSTILE))[: len(data) - i]
    elif op == "trunc":
        del data[i:]
    elif op == "zero":
        n = rng.randint(1, 2048)
        data[i : i + n] = bytes(len(data[i : i + n]))
    elif op == "junk":
        n = min(len(data) - i, rng.randint(1, 256))
        data[i : i + n] = rng.randbytes(n)
    else:
        data = bytearray()
    return data, i


def test_randomly_damaged_stores_through_the_cli(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    roots = {}
    for name in ("4.9.7/journey", "5.3.3/plain"):
        dst = tmp_path / name.replace("/", "_")
        shutil.copytree(STORES[name], dst, ignore=shutil.ignore_patterns("timerwheel"))
        roots[name] = dst
    files = {
        name: [p for p in sorted(root.rglob("*")) if p.is_file() and p.stat().st_size < 1 << 20]
        for name, root in roots.items()
    }
    failures = 0
    for _ in range(CASES):
        name = rng.choice(list(roots))
        # commitlog files are where most of the parsing is: weight them up
        pool = files[name]
        cl = [p for p in pool if p.parent.name == "commitlog"]
        p = rng.choice(cl) if rng.random() < 0.5 else rng.choice(pool)
        original = p.read_bytes()
        damaged, where = _mutate(rng, bytearray(original))
        p.write_bytes(bytes(damaged))
        try:
            cmd = rng.choice(COMMANDS)
            off = int(p.name) + where if p.parent.name == "commitlog" else 0
            args = [cmd[0], str(roots[name]), *(w.format(off=off) for w in cmd[1:])]
            run = run_inproc(args)
            assert_no_crash(run)
            if run.exit_code == 1 and not run.stdout.startswith("no message"):
                assert any(ln.startswith("error: ") for ln in run.error_lines), (args, run)
            failures += run.exit_code != 0
        finally:
            p.write_bytes(original)
    assert failures > CASES // 5  # the damage is real: many runs must have failed
