"""Mutation harness over every real store: seeded damage inside data, every read command.

For each fixture store (4.9.7 plain, plain-crashed, journey; 5.3.3 plain) a private copy is
damaged in one place at a time, inside data: record headers (magic, TOTALSIZE, PHYSICALOFFSET,
BODYCRC, body and properties lengths), bodies, properties, a zeroed record, a torn last record
or torn properties inside the data (zeros at a record's end: its lengths still add up), a
truncated tail, consume-queue units and index entries. After each mutation the damaged file
is restored.

Two rules are checked for every mutation and every read command (in-process, CliRunner):

* **no command exits 0 after skipping bytes**: whatever the store noted while the command ran
  (``Store.note``: unreadable regions, CRC mismatches, damaged units and index files) is printed
  as one ``error:`` line and the exit status is 1;
* **the damage is named where it is**: the commands that must read the mutated bytes
  (``EXPECT`` per mutation kind) exit 1 with a line ``FILE @ OFFSET`` whose file is the mutated
  file and whose offset lies inside the mutated record, unit or entry (the README's contract:
  the byte offset inside that file).

``scan`` (Spark) runs on a few of these mutations in the slow-marked test at the end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from robust_harness import ERROR_LINE, STORES, Run, run_inproc, run_subprocess

from mqtool.formats.commitlog import MAGIC_V2
from mqtool.formats.errors import Finding
from mqtool.store import Store

SEED = 20261123


@dataclass(frozen=True)
class Rec:
    """A clean message record of the copy, with where its fields are inside its file."""

    path: Path
    rel: str
    pos: int
    phy: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    uniq: str | None
    keys: tuple[str, ...]
    body_pos: int
    body_len: int
    props_pos: int
    props_len: int
    v2: bool


@dataclass
class Mutation:
    """One damage: the file it is in (relative to the store root), the byte range inside that
    file a finding must point into, and the commands that must report it."""

    kind: str
    rel: str
    lo: int
    hi: int
    commands: list[list[str]] = field(default_factory=list)
    restore: Callable[[], None] = lambda: None


def _records(root: Path) -> list[Rec]:
    out = []
    with Store.open(root) as st:
        st.check_crc = False
        for m in st.messages():
            f = st.file_for(m.physical_offset)
            assert f is not None
            pos = m.physical_offset - f.start
            end = pos + m.total_size
            plen = len(m.properties_raw.encode())
            props_pos = end - plen
            tlen = len(m.topic.encode())
            topic_len_pos = props_pos - 2 - tlen - (2 if m.magic == MAGIC_V2 else 1)
            out.append(Rec(
                f.path, f.rel, pos, m.physical_offset, m.total_size, m.topic, m.queue_id,
                m.queue_offset, m.uniq_key, tuple(m.key_list), topic_len_pos - len(m.body),
                len(m.body), props_pos, plen, m.magic == MAGIC_V2,
            ))
        assert not st.findings, st.findings
    return out


def _patch(path: Path, pos: int, data: bytes) -> Callable[[], None]:
    """Overwrite bytes at ``pos``; returns the undo."""
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(len(data))
        f.seek(pos)
        f.write(data)

    def undo() -> None:
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(old)

    return undo


def _flip(path: Path, pos: int, rng: random.Random, width: int = 1) -> Callable[[], None]:
    with open(path, "rb") as f:
        f.seek(pos)
        b = bytearray(f.read(width))
    b[rng.randrange(width)] ^= 1 << rng.randrange(8)
    return _patch(path, pos, bytes(b))


def _truncate(path: Path, size: int) -> Callable[[], None]:
    data = path.read_bytes()
    os.truncate(path, size)
    return lambda: path.write_bytes(data)


# --- mutations inside commitlog records ---------------------------------------------------------
def _record_commands(root: Path, r: Rec, structural: bool) -> list[list[str]]:
    """The read commands that must meet the damage of record ``r``."""
    s = str(root)
    cmds = [["messages", s, "--jsonl"], ["verify", s], ["msg", s, str(r.phy), "--json"]]
    if structural:
        cmds.append(["inspect", s, "--json"])
        if r.uniq:
            cmds.append(["trace", s, r.uniq, "--json"])
        if r.keys:
            cmds.append(["index", s, "--key", r.keys[0], "--json"])
    if r.topic.startswith("%DLQ%"):
        cmds.append(["dlq", "list", s, "--json"])
    return cmds


def _pick(rng: random.Random, recs: list[Rec], ok: Callable[[Rec], bool] = lambda r: True) -> Rec:
    return rng.choice([r for r in recs if ok(r)])


def _header(kind: str, at: int, width: int) -> Callable[..., Mutation]:
    def mutate(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
        r = _pick(rng, recs)
        undo = _flip(r.path, r.pos + at, rng, width)
        return Mutation(kind, r.rel, r.pos, r.pos + r.size,
                        _record_commands(root, r, kind != "bodycrc"), undo)

    mutate.__name__ = kind
    return mutate


def body(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    r = _pick(rng, recs, lambda r: r.body_len > 0)
    undo = _flip(r.path, r.body_pos + rng.randrange(r.body_len), rng)
    return Mutation("body", r.rel, r.pos, r.pos + r.size, _record_commands(root, r, False), undo)


def properties(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    """A byte that is not UTF-8 inside the properties (5.x: any byte, the __CRC32# property
    covers the record)."""
    r = _pick(rng, recs, lambda r: r.props_len > 2)
    at = r.props_pos + rng.randrange(r.props_len - 1)
    undo = _patch(r.path, at, b"\xff")
    return Mutation("properties", r.rel, r.pos, r.pos + r.size,
                    _record_commands(root, r, True), undo)


def zero_record(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    # a record followed by another one in its file: the zeros cannot be the end of the data
    nxt = {(r.rel, r.pos + r.size) for r in recs}
    r = _pick(rng, recs, lambda r: (r.rel, r.pos + r.size) in nxt
              and any(q.rel == r.rel and q.pos == r.pos + r.size for q in recs))
    undo = _patch(r.path, r.pos, bytes(r.size))
    return Mutation("zero-record", r.rel, r.pos, r.pos + r.size,
                    _record_commands(root, r, True), undo)


def _last(recs: list[Rec]) -> Rec:
    return max(recs, key=lambda r: r.phy)


def torn_tail(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    """The last record's second half never reached the disk (zeros up to the data end): the
    lengths still add up, and 4.9.7 has no properties CRC; the zeros at the end of its
    properties name it (``properties-torn``)."""
    r = _last(recs)
    half = r.size // 2
    undo = _patch(r.path, r.pos + half, bytes(r.size - half))
    return Mutation("torn-tail", r.rel, r.pos, r.pos + r.size,
                    _record_commands(root, r, True), undo)


def torn_properties(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    """The page holding the end of a record's properties was never written (zeros), and
    intact records follow it in its file."""
    starts = {(r.rel, r.pos) for r in recs}
    r = _pick(rng, recs, lambda r: r.props_len > 0 and (r.rel, r.pos + r.size) in starts)
    k = rng.randrange(1, r.props_len + 1)
    undo = _patch(r.path, r.pos + r.size - k, bytes(k))
    return Mutation("torn-properties", r.rel, r.pos, r.pos + r.size,
                    _record_commands(root, r, True), undo)


def truncated(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
    """The file holding the last record ends inside it."""
    r = _last(recs)
    undo = _truncate(r.path, r.pos + rng.randrange(8, r.size))
    return Mutation("truncated", r.rel, r.pos, r.pos + r.size,
                    _record_commands(root, r, True), undo)


# --- consume-queue units and index entries ------------------------------------------------------
def _units(root: Path) -> list[tuple[Path, int, str, int]]:
    """(file, in-file position, topic, queueId) of every written unit."""
    out = []
    for p in sorted(q for q in (root / "consumequeue").rglob("0*") if q.is_file()):
        raw = p.read_bytes()
        topic, qid = p.parent.parent.name, int(p.parent.name)
        for pos in range(0, len(raw) - 19, 20):
            if raw[pos:pos + 20].strip(b"\0"):
                out.append((p, pos, topic, qid))
    return out


def _cq_mutation(kind: str, field_at: int, hostile: bytes | None) -> Callable[..., Mutation]:
    def mutate(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
        p, pos, topic, qid = rng.choice(_units(root))
        if hostile is None:
            undo = _flip(p, pos + field_at, rng, 8 if field_at == 0 else 4)
        else:
            undo = _patch(p, pos + field_at, hostile)
        s = str(root)
        cmds = [["cq", s, topic, str(qid), "--jsonl"], ["verify", s]]
        if topic.startswith("%DLQ%"):
            cmds.append(["dlq", "list", s, "--json"])
        return Mutation(kind, p.relative_to(root).as_posix(), pos, pos + 20, cmds, undo)

    mutate.__name__ = kind
    return mutate


def _index_mutation(kind: str) -> Callable[..., Mutation]:
    def mutate(root: Path, recs: list[Rec], rng: random.Random) -> Mutation:
        from mqtool.formats.indexfile import IndexReader

        files = sorted(p for p in (root / "index").iterdir() if p.is_file())
        p = rng.choice(files)
        reader = IndexReader(p.read_bytes())
        g, count = reader.geometry, reader.header.index_count
        n = rng.randrange(1, count)
        at = g.entry_pos(n)
        if kind == "index-phy":
            undo = _flip(p, at + 4, rng, 8)
        elif kind == "index-prev":
            undo = _patch(p, at + 16, struct.pack(">i", count + 5))
        else:  # index-slot: a used slot now points at a later, unrelated entry or past the end
            slot = next(i for i in range(g.hash_slot_num) if reader.slot_value(i) > 0)
            at = g.slot_pos(slot)
            undo = _patch(p, at, struct.pack(">i", count + 7))
            s = str(root)
            return Mutation(kind, f"index/{p.name}", at, at + 4,
                            [["index", s, "--json"], ["verify", s]], undo)
        s = str(root)
        return Mutation(kind, f"index/{p.name}", at, at + 20,
                        [["index", s, "--json"], ["verify", s]], undo)

    mutate.__name__ = kind
    return mutate


# offsets inside a record: TOTALSIZE 0, MAGIC 4, BODYCRC 8, PHYSICALOFFSET 28
MUTATIONS: list[Callable[..., Mutation]] = [
    _header("magic", 4, 4),
    _header("totalsize", 0, 4),
    _header("phyoffset", 28, 8),
    _header("bodycrc", 8, 4),
    body,
    properties,
    zero_record,
    torn_tail,
    torn_properties,
    truncated,
    _cq_mutation("cq-offset", 0, None),
    _cq_mutation("cq-size", 8, None),
    _cq_mutation("cq-impossible", 0, struct.pack(">qi", -1, -1)),
    _index_mutation("index-phy"),
    _index_mutation("index-prev"),
    _index_mutation("index-slot"),
]


# --- what a command must say --------------------------------------------------------------------
@contextmanager
def _noted() -> Iterator[list[Finding]]:
    """Every finding any Store notes while the block runs."""
    seen: list[Finding] = []
    real = Store.note

    def note(self: Store, f: Finding) -> None:
        seen.append(f)
        real(self, f)

    Store.note = note  # type: ignore[method-assign]
    Store._note = note  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Store.note = real  # type: ignore[method-assign]
        Store._note = real  # type: ignore[method-assign]


def _check_noted(args: list[str], run: Run, noted: list[Finding]) -> None:
    """What the store noted is printed and makes the exit status 1 (nothing skipped quietly)."""
    assert "Traceback" not in run.stderr, (args, run.stderr)
    errors = [f for f in noted if f.severity == "error"]
    if not errors:
        return
    assert run.exit_code == 1, (args, run.exit_code, [str(f) for f in errors], run.stderr)
    places = _json_places(run.stdout)
    for f in errors:
        where = f"{f.file} @ {f.offset:#x}" if f.offset is not None else f"{f.file}"
        assert any(where in ln for ln in _lines(run)) or (f.file, f.offset) in places, (
            args, str(f), run.stderr[-2000:])


def _lines(run: Run) -> list[str]:
    """The ``error:`` lines on stderr, and those a report lists on stdout (``verify``)."""
    out = list(run.error_lines)
    out += [ln.strip() for ln in run.stdout.splitlines() if ln.strip().startswith("error: ")]
    return out


def _json_places(stdout: str) -> set[tuple[str, int | None]]:
    """(file, offset) of the findings a ``--json`` answer carries (``{"findings": [...]}``)."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return set()
    out: set[tuple[str, int | None]] = set()
    for f in doc.get("findings", []) if isinstance(doc, dict) else []:
        if isinstance(f, dict) and "file" in f:
            out.add((f["file"], f.get("offset")))
    return out


def _named(run: Run, m: Mutation) -> bool:
    """An ``error:`` line (stderr) names the mutated file at an offset inside the damage."""
    for file, off in _json_places(run.stdout):
        if file == m.rel and off is not None and m.lo <= off < m.hi:
            return True
    for ln in _lines(run):
        g = ERROR_LINE.match(ln)
        if g and g["file"] == m.rel and g["off"] is not None and m.lo <= int(g["off"], 16) < m.hi:
            return True
    return False


def _all_commands(root: Path, recs: list[Rec]) -> list[list[str]]:
    """Every read command (besides the targeted ones): the quiet-skip rule for all."""
    s = str(root)
    r = recs[len(recs) // 2]
    cmds = [["inspect", s, "--json"], ["cq", s, "--jsonl"], ["index", s, "--json"],
            ["dlq", "list", s, "--json"], ["messages", s, "--jsonl"], ["verify", s, "--json"],
            ["msg", s, str(r.phy), "--json"]]
    if r.uniq:
        cmds.append(["trace", s, r.uniq, "--json"])
    return cmds


def _mutations_for(name: str) -> list[Callable[..., Mutation]]:
    # the 2,099-message stores take longest per command: every kind once over the two of them
    if name == "4.9.7/plain":
        return MUTATIONS[0::2]
    if name == "4.9.7/plain-crashed":
        return MUTATIONS[1::2]
    return MUTATIONS


@pytest.mark.parametrize("name", list(STORES))
def test_every_mutation_is_reported_where_it_is(tmp_path: Path, name: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(STORES[name], root, ignore=shutil.ignore_patterns("timerwheel"))
    recs = _records(root)
    rng = random.Random(f"{SEED}:{name}")
    problems: list[str] = []
    for mutate in _mutations_for(name):
        if mutate.__name__.startswith("index") and not (root / "index").is_dir():
            continue
        m = mutate(root, recs, rng)
        try:
            targeted = {tuple(c) for c in m.commands}
            others = [c for c in _all_commands(root, recs) if tuple(c) not in targeted]
            # the quiet-skip rule also for two other commands per mutation (all over the run)
            for args in m.commands + rng.sample(others, min(2, len(others))):
                with _noted() as noted:
                    run = run_inproc(args)
                _check_noted(args, run, noted)
                if tuple(args) in targeted and not (run.exit_code == 1 and _named(run, m)):
                    problems.append(
                        f"{m.kind} at {m.rel} @ {m.lo:#x}..{m.hi:#x}: mqtool {args[0]} "
                        f"{' '.join(args[2:])} -> exit {run.exit_code}: "
                        f"{run.stderr.strip()[-300:]!r}")
        finally:
            m.restore()
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_scan_reports_mutations(tmp_path: Path) -> None:
    """Spark is expensive: one run over three damaged copies (record header, body, CQ unit)."""
    roots, muts = [], []
    for i, (name, mutate) in enumerate([
        ("4.9.7/journey", MUTATIONS[0]), ("5.3.3/plain", body),
        ("4.9.7/journey", _cq_mutation("cq-impossible", 0, struct.pack(">qi", -1, -1))),
    ]):
        root = tmp_path / f"s{i}"
        shutil.copytree(STORES[name], root, ignore=shutil.ignore_patterns("timerwheel"))
        muts.append(mutate(root, _records(root), random.Random(SEED + i)))
        roots.append(root)
    run = run_subprocess(["scan", *map(str, roots)], limit_memory=False, timeout=600)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.exit_code == 1, (run.exit_code, run.stderr[-2000:])
    for m in muts:
        assert m.rel in run.stderr, (m.kind, m.rel, run.stderr[-2000:])


def test_harness_mutations_damage_the_bytes(tmp_path: Path) -> None:
    """The mutations really change the store (and their undo restores it byte for byte)."""
    root = tmp_path / "store"
    shutil.copytree(STORES["4.9.7/journey"], root)
    recs = _records(root)
    rng = random.Random(SEED)
    for mutate in MUTATIONS:
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        m = mutate(root, recs, rng)
        after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        assert before != after, m.kind
        m.restore()
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before, m.kind
