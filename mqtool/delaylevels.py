"""Which delay levels a store was written with, and where that knowledge comes from.

One home for ``inspect``, ``trace`` and ``verify``: :func:`resolve_delay_levels` gives the
``{level: delay ms}`` table the commands use, per level where it came from, and a warning for
every level where what the operator said contradicts what the store shows.

Evidence (RocketMQ 4.x and 5.x): a message put with a delay level is stored in
``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` (``ScheduleMessageService#delayLevel2QueueId``), and
its consume-queue unit's tagsCode is the deliver time
``ScheduleMessageService#computeDeliverTimestamp(level, storeTimestamp)`` = the record's
storeTimestamp + the level's delay (``CommitLog#checkMessageAndReturnSize``). So tagsCode minus
the record's storeTimestamp is the delay the broker had for that level when it wrote the unit.
The first and last :data:`SAMPLE` units of each schedule queue are read; when they disagree
(the broker's ``messageDelayLevel`` changed in between) the latest unit wins and an info finding
says so.

Sources, in order: ``--delay-levels`` (the ``messageDelayLevel`` string), ``--broker-conf``
(``messageDelayLevel`` of the broker's properties file; the broker's default when the key is
absent), else the store's evidence for the levels it shows and the broker's default
(``MessageStoreConfig.messageDelayLevel``) for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqtool.formats.config.properties import load_properties
from mqtool.formats.errors import (
    DELAY_LEVELS,
    EXIT_USAGE,
    BadConfigError,
    Finding,
    MqtoolError,
    Severity,
)
from mqtool.formats.rules import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    SCHEDULE_TOPIC,
    BrokerRuleError,
    delay_written,
    fmt_delay,
    is_ext_addr,
    parse_delay_levels,
    queue_id_to_delay_level,
    schedule_unit_delay,
)
from mqtool.store.reader import Store

BROKER_CONF_KEY = "messageDelayLevel"  # MessageStoreConfig#setMessageDelayLevel
SAMPLE = 16
"""Units read at each end of a schedule queue."""

SOURCE_EVIDENCE = "evidence"
SOURCE_OPTION = "--delay-levels"
SOURCE_DEFAULT = "default"


class DelayLevelsError(MqtoolError):
    """Both --delay-levels and --broker-conf, or levels (given, or in a broker.conf) that
    cannot be used: what the command was given is wrong."""

    exit_status = EXIT_USAGE


@dataclass(frozen=True, slots=True)
class Observation:
    """One schedule unit's delay: tagsCode (deliver time) - the record's storeTimestamp."""

    delay_ms: int
    file: str
    offset: int
    phy: int
    queue_offset: int


@dataclass(slots=True)
class LevelEvidence:
    """What the store shows for one level (its schedule queue ``level - 1``)."""

    level: int
    latest: Observation
    units: int = 0  # units read that gave a delay
    delays: dict[int, int] = field(default_factory=dict)  # delay ms -> units showing it

    @property
    def delay_ms(self) -> int:
        return self.latest.delay_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level, "queueId": self.level - 1, "delayMs": self.delay_ms,
            "delay": fmt_delay(self.delay_ms), "file": self.latest.file,
            "offset": self.latest.offset, "queueOffset": self.latest.queue_offset,
            "unitsRead": self.units,
            "delaysSeen": {fmt_delay(d): n for d, n in sorted(self.delays.items())},
        }


@dataclass(slots=True)
class DelayLevels:
    """The delay-level table a command uses, and where each level came from."""

    table: dict[int, int]
    sources: dict[int, str]
    origin: str  # "--delay-levels", "broker.conf PATH", "evidence + default", "default"
    evidence: dict[int, LevelEvidence]
    findings: list[Finding] = field(default_factory=list)
    unusable_units: int = 0

    def source_of(self, level: int) -> str | None:
        return self.sources.get(level)

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "summary": self.summary(),
            "levels": [
                {"level": lv, "delayMs": ms, "delay": fmt_delay(ms), "source": self.sources[lv]}
                for lv, ms in sorted(self.table.items())
            ],
            "evidence": [e.to_json() for _, e in sorted(self.evidence.items())],
            "evidenced": sorted(self.evidence),
            "unusableUnits": self.unusable_units,
            "findings": [f.to_json() for f in self.findings],
        }

    def summary(self) -> str:
        """One line for tables: where the levels came from and which are evidenced."""
        ev = sorted(self.evidence)
        txt = self.origin
        if ev:
            txt += f"; evidence for level{'s' if len(ev) > 1 else ''} " + ", ".join(map(str, ev))
        else:
            txt += "; no evidence in the store"
        return txt


def _observe(store: Store, qid: int) -> tuple[list[Observation], int]:
    """Delays of the first and last SAMPLE units of schedule queue ``qid`` (and how many units
    could not be used: impossible, dangling, at a record of another queue, or giving a delay
    no broker writes, which the unit rule notes as damage)."""
    info = store.queue_info(SCHEDULE_TOPIC, qid)
    if info.max_offset <= info.min_offset:
        return [], 0
    starts = [info.min_offset]
    if info.max_offset - SAMPLE > info.min_offset + SAMPLE:
        starts.append(info.max_offset - SAMPLE)
    seen: set[int] = set()
    out: list[Observation] = []
    unusable = 0
    for start in starts:
        n = 0
        for qe in store.queue_entries(SCHEDULE_TOPIC, qid, start):
            if n >= SAMPLE or qe.queue_offset >= info.max_offset:
                break
            n += 1
            if qe.queue_offset in seen:
                continue
            seen.add(qe.queue_offset)
            e = qe.entry
            if is_ext_addr(e.tags_code) or store.unit_problem(e) is not None:
                unusable += 1  # the unit itself is a finding of the store's reader
                continue
            m = store.try_message_at(e.commit_log_offset)
            if m is None or m.topic != SCHEDULE_TOPIC or m.queue_id != qid:
                unusable += 1
                continue
            delay = schedule_unit_delay(e.tags_code, m.store_timestamp)
            if not delay_written(delay):
                unusable += 1  # damage: the unit rule noted it when the queue was read
                continue
            out.append(Observation(delay, qe.file, qe.file_offset, e.commit_log_offset,
                                   qe.queue_offset))
    out.sort(key=lambda o: o.queue_offset)
    return out, unusable


def collect_evidence(store: Store) -> tuple[dict[int, LevelEvidence], list[Finding], int]:
    """Per level, what the store's schedule queues show (see the module doc)."""
    evidence: dict[int, LevelEvidence] = {}
    findings: list[Finding] = []
    unusable = 0
    for topic, qid in store.queue_ids():
        if topic != SCHEDULE_TOPIC:
            continue
        obs, bad = _observe(store, qid)
        unusable += bad
        if not obs:
            continue
        level = queue_id_to_delay_level(qid)
        ev = LevelEvidence(level, obs[-1])
        for o in obs:
            ev.units += 1
            ev.delays[o.delay_ms] = ev.delays.get(o.delay_ms, 0) + 1
        evidence[level] = ev
        if len(ev.delays) > 1:
            first = next(o for o in obs if o.delay_ms != ev.delay_ms)
            seen = ", ".join(f"{fmt_delay(d)} ({n} units)" for d, n in sorted(ev.delays.items()))
            findings.append(Finding(
                DELAY_LEVELS, first.file, first.offset,
                f"delay level {level}: {SCHEDULE_TOPIC} queue {qid} holds units written with "
                f"different delays ({seen}): the broker's messageDelayLevel changed; the latest "
                f"unit ({ev.latest.file} @ {ev.latest.offset:#x}) gives "
                f"{fmt_delay(ev.delay_ms)}", severity=Severity.INFO,
                expected=fmt_delay(ev.delay_ms), found=fmt_delay(first.delay_ms), phy=first.phy,
            ))
    return evidence, findings, unusable


def levels_from_broker_conf(path: str | Path) -> tuple[str | None, str]:
    """(``messageDelayLevel`` of a broker properties file or None when absent, label)."""
    try:
        props = load_properties(path)
    except BadConfigError as e:
        raise DelayLevelsError(f"--broker-conf {e}") from None
    return props.get(BROKER_CONF_KEY), f"broker.conf {path}"


def given_levels(
    delay_levels: str | None = None, broker_conf: str | Path | None = None,
) -> tuple[str | None, str]:
    """(the ``messageDelayLevel`` string the operator gave, its label), or (None, "") when
    neither option is given; DelayLevelsError for both, errors of an unreadable broker.conf."""
    if delay_levels is not None and broker_conf is not None:
        raise DelayLevelsError("give --delay-levels or --broker-conf, not both")
    if delay_levels is not None:
        return delay_levels, SOURCE_OPTION
    if broker_conf is not None:
        given, label = levels_from_broker_conf(broker_conf)
        if given is None:  # the broker runs with its default
            return DEFAULT_MESSAGE_DELAY_LEVEL, (
                f"{SOURCE_DEFAULT} ({broker_conf} has no {BROKER_CONF_KEY})")
        return given, label
    return None, ""


def check_levels(levels: str, label: str = SOURCE_OPTION) -> dict[int, int]:
    """``levels`` (a ``messageDelayLevel`` string) as level -> delay ms; DelayLevelsError
    (a usage error) when it is not one."""
    try:
        return parse_delay_levels(levels)
    except BrokerRuleError as e:
        raise DelayLevelsError(f"{label}: {e}") from None


def levels_to_write(delay_levels: str | None = None,
                    broker_conf: str | Path | None = None) -> str | None:
    """The ``messageDelayLevel`` a store that is written gets from ``--delay-levels`` or
    ``--broker-conf`` (None: neither given), refused (a usage error) when it is not one."""
    levels = given_levels(delay_levels, broker_conf)[0]
    if levels is not None:
        check_levels(levels)
    return levels


def resolve_delay_levels(
    store: Store, delay_levels: str | None = None, broker_conf: str | Path | None = None,
) -> DelayLevels:
    """The levels to use for ``store``: from ``delay_levels`` (the --delay-levels string), else
    ``broker_conf``, else the store's evidence plus the broker's default; warnings for every
    level the given levels contradict."""
    given, label = given_levels(delay_levels, broker_conf)
    table = None if given is None else check_levels(given, label)
    evidence, findings, unusable = collect_evidence(store)
    if table is None:
        table = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
        sources = dict.fromkeys(table, SOURCE_DEFAULT)
        for level, ev in evidence.items():
            table[level] = ev.delay_ms
            sources[level] = SOURCE_EVIDENCE
        origin = f"{SOURCE_EVIDENCE} + {SOURCE_DEFAULT}" if evidence else SOURCE_DEFAULT
        return DelayLevels(table, sources, origin, evidence, findings, unusable)
    sources = dict.fromkeys(table, label)
    for level, ev in sorted(evidence.items()):
        o = ev.latest
        where = f"{SCHEDULE_TOPIC} queue {level - 1} unit @{o.queue_offset}"
        if level not in table:
            findings.append(Finding(
                DELAY_LEVELS, o.file, o.offset,
                f"delay level {level}: {label} defines only {len(table)} levels, but {where} "
                f"was written with level {level} ({fmt_delay(o.delay_ms)})",
                severity=Severity.WARNING, expected=f">= {level} levels",
                found=f"{len(table)} levels", phy=o.phy,
            ))
        elif table[level] != o.delay_ms:
            findings.append(Finding(
                DELAY_LEVELS, o.file, o.offset,
                f"delay level {level}: {label} says {fmt_delay(table[level])}, but {where} "
                f"was written with {fmt_delay(o.delay_ms)} (tagsCode - storeTimestamp)",
                severity=Severity.WARNING, expected=fmt_delay(o.delay_ms),
                found=fmt_delay(table[level]), phy=o.phy,
            ))
    return DelayLevels(table, sources, label, evidence, findings, unusable)
