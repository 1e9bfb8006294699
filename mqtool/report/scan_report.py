"""``mqtool scan --report``: the audit of one or more stores as one self-contained HTML page.

Every number comes from the scan's own summary (the document ``mqtool scan --json`` prints),
embedded unchanged under ``"scan"``. Two things the summary does not hold are read from each
store directly, without Spark, and embedded under ``"stores"``: its geometry (file sizes and
counts, from the directory and file headers) and the due times of its pending schedule entries
(the consume-queue tagsCode of ``SCHEDULE_TOPIC_XXXX`` from each level's delayOffset on), for
the histogram of due times. The tests check those against the summary too (pending per level).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.formats.rules import SCHEDULE_TOPIC
from mqtool.report import charts
from mqtool.report.page import Cell, Page, esc, write_page
from mqtool.timefmt import fmt_time as utc  # the one way mqtool shows a time

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MAX_TOPICS = 8  # series in a per-topic chart; the rest are summed as "other"
MAX_LAG_BARS = 40
DUE_BINS = 30


# ------------------------------------------------------------------------------------------
# what the summary does not hold: read from the store itself (no Spark)


def store_facts(store: str) -> dict[str, Any]:
    """Geometry and pending schedule due times of one store (library reads, no Spark)."""
    from mqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
    from mqtool.formats.errors import FormatError, MqtoolError
    from mqtool.overview import load_delay_offsets
    from mqtool.store.files import disk_bytes
    from mqtool.store.reader import Store

    try:
        st = Store.open(store)
    except MqtoolError as e:
        return {"store": store, "geometry": None, "scheduleDue": [], "findings": [str(e)]}
    try:
        cl = st.commitlog_files
        queues = st.queue_ids()
        cq_files = 0
        cq_bytes = 0
        for t, q in queues:
            for p in (st.consumequeue_dir / t / str(q)).iterdir():
                if p.is_file():
                    cq_files += 1
                    cq_bytes += p.stat().st_size
        index = st.index_files()
        geometry: dict[str, Any] = {
            "commitlogFiles": len(cl),
            "commitlogBytes": sum(f.size for f in cl),
            "commitlogDiskBytes": sum(disk_bytes(f.path) for f in cl),
            "mappedFileSize": st.mapped_file_size,
            "minOffset": cl[0].start if cl else 0,
            "topics": len({t for t, _ in queues}),
            "queues": len(queues),
            "consumeQueueFiles": cq_files,
            "consumeQueueBytes": cq_bytes,
            "consumeQueueUnitSize": CQ_STORE_UNIT_SIZE,
            "indexFiles": len(index),
            "indexHashSlots": index[0][1].geometry.hash_slot_num if index else None,
            "indexEntriesPerFile": index[0][1].geometry.index_num if index else None,
            "abortFile": st.abort_exists,
        }
        try:
            delay = load_delay_offsets(st) or {}
        except FormatError:
            delay = {}  # the scan's integrity audit reports a bad delayOffset.json
        due: list[dict[str, Any]] = []
        for t, q in queues:
            if t != SCHEDULE_TOPIC:
                continue
            start = delay.get(q + 1, 0)
            times = [qe.entry.tags_code for qe in st.queue_entries(t, q, start)
                     if qe.queue_offset >= start]
            due.append({"delayLevel": q + 1, "queueId": q, "fromOffset": start,
                        "dueTimestamps": times})
        due.sort(key=lambda d: d["delayLevel"])
        return {"store": store, "geometry": geometry, "scheduleDue": due,
                "findings": [str(f) for f in st.findings]}
    finally:
        st.close()


# ------------------------------------------------------------------------------------------
# charts


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _num(ms: int) -> float:
    """Epoch ms as a matplotlib date number."""
    import matplotlib.dates as mdates

    return float(mdates.date2num(_dt(ms)))  # type: ignore[no-untyped-call]


def _time_axis(ax: Axes) -> None:
    import matplotlib.dates as mdates

    loc = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(loc, tz=UTC)  # type: ignore[no-untyped-call]
    )


def _top(names_counts: dict[str, int], n: int) -> list[str]:
    return [k for k, _ in sorted(names_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def rate_svg(rows: list[dict[str, Any]]) -> str:
    """Messages and bytes per time bucket, stacked by topic (the ``rate`` audit)."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r["topic"]] += r["count"]
    top = _top(totals, MAX_TOPICS)
    other = f"other {len(totals) - len(top)} topics" if len(totals) > len(top) else None
    series = top + ([other] if other else [])
    buckets = sorted({r["bucketStart"] for r in rows})
    step = min((b - a for a, b in zip(buckets, buckets[1:], strict=False)), default=60_000)
    idx = {b: i for i, b in enumerate(buckets)}
    counts = {s: [0] * len(buckets) for s in series}
    sizes = {s: [0] * len(buckets) for s in series}
    for r in rows:
        s = r["topic"] if r["topic"] in top else other
        assert s is not None
        counts[s][idx[r["bucketStart"]]] += r["count"]
        sizes[s][idx[r["bucketStart"]]] += r["bytes"]
    colors = charts.color_map(series)
    xs = [_dt(b + step // 2) for b in buckets]
    width = step / 86_400_000 * 0.9  # matplotlib dates are in days
    with charts.figure(10.0, 5.0) as fig:
        ax1, ax2 = fig.subplots(2, 1, sharex=True)
        for ax, data, label in ((ax1, counts, "messages"), (ax2, sizes, "bytes")):
            bottom = [0] * len(buckets)
            for s in series:
                ax.bar(xs, data[s], width=width, bottom=bottom, color=colors[s], label=s,
                       linewidth=0)
                bottom = [a + b for a, b in zip(bottom, data[s], strict=True)]
            ax.set_ylabel(f"{label} per {_fmt_step(step)}")
            ax.grid(axis="x", visible=False)
        ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.yaxis.set_major_formatter(EngFormatter(unit="B"))
        ax1.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        _time_axis(ax2)
        ax2.set_xlabel("store time (UTC)")
        return charts.svg(fig)


def _fmt_step(ms: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000),
                       ("second", 1000)):
        if ms % size == 0:
            n = ms // size
            return unit if n == 1 else f"{n} {unit}s"
    return f"{ms} ms"


def dlq_svg(rows: list[dict[str, Any]]) -> str:
    """Dead-lettered messages per consumer group, split by original topic."""
    from matplotlib.ticker import MaxNLocator

    topics: dict[str, int] = defaultdict(int)
    for r in rows:
        for t, n in r["byOriginalTopic"].items():
            topics[t] += n
    series = _top(topics, len(topics))
    colors = charts.color_map(series)
    groups = [r["group"] for r in rows]
    with charts.figure(9.0, max(1.6, 0.45 * len(rows) + 1.0)) as fig:
        ax = fig.add_subplot()
        left = [0] * len(rows)
        for t in series:
            vals = [r["byOriginalTopic"].get(t, 0) for r in rows]
            ax.barh(groups, vals, left=left, color=colors[t], label=t, height=0.6)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        for i, r in enumerate(rows):
            ax.annotate(str(r["count"]), (left[i], i), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=8.5)
        ax.invert_yaxis()
        ax.set_xlabel("dead-lettered messages")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", visible=False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="original topic")
        return charts.svg(fig)


def retry_svg(rows: list[dict[str, Any]]) -> str:
    """How many retry copies carry each reconsumeTimes, per group."""
    from matplotlib.ticker import MaxNLocator

    groups = sorted({r["group"] for r in rows})
    depths = sorted({r["reconsumeTimes"] for r in rows})
    colors = charts.color_map(groups)
    n = len(groups)
    w = 0.8 / max(n, 1)
    with charts.figure(9.0, 3.0) as fig:
        ax = fig.add_subplot()
        for gi, g in enumerate(groups):
            by = {r["reconsumeTimes"]: r["count"] for r in rows if r["group"] == g}
            xs = [d + (gi - (n - 1) / 2) * w for d in depths]
            ax.bar(xs, [by.get(d, 0) for d in depths], width=w, color=colors[g], label=g)
        ax.set_xticks(depths)
        ax.set_xlabel("reconsumeTimes (retry depth)")
        ax.set_ylabel("messages in %RETRY%<group>")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="group")
        return charts.svg(fig)


def schedule_svg(rows: list[dict[str, Any]], due: list[dict[str, Any]], now: int) -> str:
    """Backlog per delay level (overdue vs. not yet due) and a histogram of the due times."""
    from matplotlib.ticker import MaxNLocator

    pos = list(range(len(rows)))  # one slot per level present, no gaps between far levels
    overdue = [r["overdue"] for r in rows]
    waiting = [r["pending"] - r["overdue"] for r in rows]
    all_due = [t for d in due for t in d["dueTimestamps"]]
    with charts.figure(10.0, 5.4 if all_due else 2.8) as fig:
        axes = fig.subplots(2, 1) if all_due else [fig.add_subplot()]
        ax = axes[0]
        ax.bar(pos, waiting, color="#E69F00", label="pending, not yet due", width=0.6)
        ax.bar(pos, overdue, bottom=waiting, color="#D55E00", label="pending, overdue",
               width=0.6)
        for i, r in enumerate(rows):
            if r["beyondMax"]:
                ax.annotate("delayOffset beyond max", (i, r["pending"]),
                            xytext=(0, 4), textcoords="offset points", ha="center",
                            fontsize=8, color="#cf222e")
        ax.set_xticks(pos, [str(r["delayLevel"]) for r in rows])
        ax.set_xlabel("delay level")
        ax.set_ylabel("pending entries")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title("backlog per delay level (SCHEDULE_TOPIC_XXXX)")
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        if all_due:
            ax2 = axes[1]
            lo, hi = min(all_due + [now]), max(all_due + [now])
            span = max(hi - lo, 1000)
            edges = [lo + span * i / DUE_BINS for i in range(DUE_BINS + 1)]
            per_level = [d for d in due if d["dueTimestamps"]]
            colors = charts.color_map([f"level {d['delayLevel']}" for d in per_level])
            ax2.hist([[_num(t) for t in d["dueTimestamps"]] for d in per_level],
                     bins=[_num(int(e)) for e in edges], stacked=True,
                     color=[colors[f"level {d['delayLevel']}"] for d in per_level],
                     label=[f"level {d['delayLevel']}" for d in per_level])
            ax2.axvline(_num(now), color="#cf222e", linestyle="--", linewidth=1,
                        label="now (--now)")
            _time_axis(ax2)
            ax2.set_xlabel("due time (UTC)")
            ax2.set_ylabel("pending entries")
            ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax2.set_title("when the pending entries are due")
            ax2.grid(axis="x", visible=False)
            ax2.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return charts.svg(fig)


def lag_svg(rows: list[dict[str, Any]]) -> str:
    """Consumer lag per (group, topic, queue), largest first."""
    from matplotlib.ticker import MaxNLocator

    shown = sorted(rows, key=lambda r: (-(r["lag"] or 0), r["group"], r["topic"],
                                        r["queueId"]))[:MAX_LAG_BARS]
    groups = sorted({r["group"] for r in shown})
    colors = charts.color_map(groups)
    labels = [f"{r['group']} · {r['topic']} q{r['queueId']}" for r in shown]
    with charts.figure(9.0, max(1.6, 0.32 * len(shown) + 1.0)) as fig:
        ax = fig.add_subplot()
        ax.barh(labels, [r["lag"] or 0 for r in shown],
                color=[colors[r["group"]] for r in shown], height=0.6)
        for i, r in enumerate(shown):
            ax.annotate(str(r["lag"]), (r["lag"] or 0, i), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("lag (max offset - consumer offset)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(rows) > len(shown):
            ax.set_title(f"largest {len(shown)} of {len(rows)}")
        ax.grid(axis="y", visible=False)
        return charts.svg(fig)


# ------------------------------------------------------------------------------------------
# the page


def _for(rows: list[dict[str, Any]] | None, store: str) -> list[dict[str, Any]]:
    return [r for r in rows or [] if r.get("store") == store]


def _chart(page: Page, summary: dict[str, Any], store: str, audit: str, title: str,
           draw: Callable[[list[dict[str, Any]]], str], empty: str) -> None:
    """A heading and the chart of one audit's rows for ``store`` (or a note: none)."""
    if audit in summary:
        page.h3(title)
        rows = _for(summary[audit], store)
        if rows:
            page.figure(draw(rows))
        else:
            page.note(empty)


def _pop_section(page: Page, rows: list[dict[str, Any]]) -> None:
    page.h3("POP checkouts")
    if not rows:
        page.note("no POP checkpoints (rmq_sys_REVIVE_LOG_<cluster>)")
        return
    page.table(
        ["group", "topic", "queue", "checked out", "acked", "invisible time changed",
         "in flight", "invisible until (UTC)", "revive due", "revived"],
        [[r["group"], r["topic"], r["queueId"], r["popped"], r["acked"],
          r["invisibleChanged"], r["inFlight"], utc(r["invisibleUntil"]), r["reviveDue"],
          r["revived"]] for r in rows],
        sortable=True, css_class="pop",
        cell_class=[["", "", "", "", "", "", "state-in-flight" if r["inFlight"] else "", "",
                     "state-revive-due" if r["reviveDue"] else "", ""] for r in rows],
    )
    page.note("in flight: checked out, not acked, invisible until its checkpoint's revive "
              "time; revive due: that time is past and the revive service's committed offset "
              "(CID_RMQ_SYS_REVIVE_GROUP) has not passed its checkpoint")


def _timer_section(page: Page, rows: list[dict[str, Any]], now: int) -> None:
    page.h3("timer backlog")
    waiting = [r for r in rows if r["waiting"]]
    if not waiting:
        page.note("no message waiting in the timer (rmq_sys_wheel_timer)")
        return
    page.table(["waiting", "overdue", "never delivered", "next due (UTC)",
                "timer read up to (UTC)", "by real topic"],
               [[r["waiting"], r["overdue"], r["neverDelivered"], utc(r["nextDue"]),
                 utc(r["lastReadTimeMs"]),
                 ", ".join(f"{t} ({n})" for t, n in r["byTopic"].items())] for r in waiting],
               css_class="timer")
    page.table(["due from (UTC, minute)", "waiting"],
               [[utc(b["dueStart"]), b["count"]] for r in waiting for b in r["byDueMinute"]],
               css_class="timer-due")
    page.note(f"overdue: due before {utc(now)} UTC (the scan's --now)")


def _store_section(page: Page, summary: dict[str, Any], facts: dict[str, Any] | None,
                   store: str, n: int, multi: bool) -> None:
    page.h2(f"Store {n}: {store}" if multi else f"Store: {store}", anchor=f"store-{n}")
    queues = _for(summary.get("queues"), store)
    integrity = _for(summary.get("integrity"), store)
    dlq = _for(summary.get("dlq"), store)
    cards: list[tuple[str, object, str]] = []
    if "queues" in summary:
        cards += [
            ("messages", sum(r["count"] for r in queues), ""),
            ("bytes", sum(r["bytes"] or 0 for r in queues), ""),
            ("topics", len({r["topic"] for r in queues}), ""),
            ("queues", len(queues), ""),
        ]
    if "dlq" in summary:
        dead = sum(r["count"] for r in dlq)
        cards.append(("dead-lettered", dead, "bad" if dead else "ok"))
    if "schedule" in summary:
        sched = _for(summary["schedule"], store)
        cards.append(("scheduled, pending", sum(r["pending"] for r in sched),
                      "warn" if any(r["overdue"] for r in sched) else ""))
    if "pop" in summary:
        pop = _for(summary["pop"], store)
        cards.append(("POP in flight", sum(r["inFlight"] for r in pop),
                      "warn" if any(r["reviveDue"] for r in pop) else ""))
    if "timer" in summary:
        timer = _for(summary["timer"], store)
        cards.append(("timer, waiting", sum(r["waiting"] for r in timer),
                      "warn" if any(r["overdue"] for r in timer) else ""))
    if "integrity" in summary:
        cards.append(("integrity findings", len(integrity), "bad" if integrity else "ok"))
    page.cards(cards)

    if facts is not None and facts["geometry"] is not None:
        g = facts["geometry"]
        page.h3("geometry")
        page.table(["what", "value"], [
            ["commitlog files", g["commitlogFiles"]],
            ["commitlog file size (mappedFileSizeCommitLog)", g["mappedFileSize"]],
            ["commitlog files' length", g["commitlogBytes"]],
            ["commitlog bytes on disk (allocated: a pre-allocated file's holes take none)",
             g.get("commitlogDiskBytes", "-")],
            ["first commitlog offset", g["minOffset"]],
            ["topics / queues (consumequeue/)", f"{g['topics']} / {g['queues']}"],
            ["consume-queue files / bytes", f"{g['consumeQueueFiles']} / "
                                            f"{g['consumeQueueBytes']}"],
            ["consume-queue unit size", g["consumeQueueUnitSize"]],
            ["index files", g["indexFiles"]],
            ["index hash slots / entries per file",
             f"{g['indexHashSlots'] or '-'} / {g['indexEntriesPerFile'] or '-'}"],
            ["abort file (unclean shutdown or running broker)",
             "yes" if g["abortFile"] else "no"],
        ])

    _chart(page, summary, store, "rate", "messages and bytes over time, per topic", rate_svg,
           "no messages")
    if "queues" in summary:
        page.h3("queues")
        page.table(
            ["topic", "queue", "messages", "bytes", "first stored (UTC)", "last stored (UTC)"],
            [[r["topic"], r["queueId"], r["count"], r["bytes"],
              utc(r["firstStoreTimestamp"]), utc(r["lastStoreTimestamp"])] for r in queues],
            sortable=True,
        )
    if "dlq" in summary:
        page.h3("dead-letter queues")
        if dlq:
            page.figure(dlq_svg(dlq))
            page.table(["group", "dead-lettered", "original topics"], [
                [r["group"], r["count"], ", ".join(
                    f"{t} ({c})" for t, c in sorted(r["byOriginalTopic"].items()))]
                for r in dlq
            ], sortable=True)
        else:
            page.note("no dead-lettered messages")
    _chart(page, summary, store, "retry", "retry depth", retry_svg, "no retry messages")
    if "schedule" in summary:
        page.h3("schedule backlog")
        sched = _for(summary["schedule"], store)
        if sched:
            due = facts["scheduleDue"] if facts else []
            page.figure(schedule_svg(sched, due, summary["now"]))
            page.table(
                ["level", "pending", "overdue", "delayOffset", "maxOffset", "beyond max",
                 "next due (UTC)"],
                [[r["delayLevel"], r["pending"], r["overdue"], r["delayOffset"], r["maxOffset"],
                  "YES" if r["beyondMax"] else "", utc(r["nextDeliverTimestamp"])]
                 for r in sched],
                sortable=True,
            )
            page.note(f"overdue: due before {utc(summary['now'])} UTC (the scan's --now)")
        else:
            page.note("nothing in SCHEDULE_TOPIC_XXXX")
    if "pop" in summary:
        _pop_section(page, _for(summary["pop"], store))
    if "timer" in summary:
        _timer_section(page, _for(summary["timer"], store), summary["now"])
    if "lag" in summary:
        page.h3("consumer lag")
        lag = _for(summary["lag"], store)
        if lag:
            page.figure(lag_svg(lag))
            page.table(["group", "topic", "queue", "consumer offset", "max offset", "lag"], [
                [r["group"], r["topic"], r["queueId"], r["consumerOffset"], r["maxOffset"],
                 r["lag"]] for r in lag
            ], sortable=True)
        else:
            page.note("no consumer offsets (config/consumerOffset.json, lmqConsumerOffset.json or "
                      "the RocksDB config/consumerOffsets/)")
    if "integrity" in summary:
        page.h3(f"integrity findings ({len(integrity)})")
        if integrity:
            page.table(["kind", "severity", "file", "offset", "detail"], [
                [r["kind"], r.get("severity", "error"), r["file"],
                 Cell(hex(r["offset"]), r["offset"]), r["detail"]]
                for r in integrity
            ], sortable=True, css_class="findings")
            page.note("click a column header to sort")
        else:
            page.note("no findings")


def scan_page(summary: dict[str, Any], facts: list[dict[str, Any]]) -> str:
    """The HTML page of a scan summary (embedded unchanged under "scan") and store facts."""
    stores: list[str] = list(summary.get("stores", []))
    multi = len(stores) > 1
    tot = summary.get("totals", {})
    page = Page(
        title="mqtool scan report",
        subtitle=f"{len(stores)} store(s) · audits: {', '.join(summary.get('audits', []))} · "
                 f"judged at {utc(summary.get('now'))} UTC",
        data={"scan": summary, "stores": facts},
    )
    page.problems([p for f in facts for p in f.get("findings", [])])
    n_integrity = len(summary.get("integrity") or [])
    page.cards([
        ("stores", len(stores), ""),
        ("messages", tot.get("messages", 0), ""),
        ("bytes", tot.get("bytes", 0), ""),
        ("consume-queue units", tot.get("consumeQueueUnits", 0), ""),
        ("unreadable regions", tot.get("unreadableRegions", 0),
         "bad" if tot.get("unreadableRegions") else "ok"),
        ("integrity findings", n_integrity, "bad" if n_integrity else "ok"),
        ("scan seconds", summary.get("elapsedSeconds"), ""),
    ])
    if multi:
        page.raw("<ul>" + "".join(
            f'<li><a href="#store-{i}">{esc(s)}</a></li>' for i, s in enumerate(stores, 1)
        ) + "</ul>")
    by_store = {f["store"]: f for f in facts}
    for i, s in enumerate(stores, 1):
        _store_section(page, summary, by_store.get(s), s, i, multi)
    return page.render()


def write_scan_report(path: Path, summary: dict[str, Any]) -> None:
    """Read each store's facts, build the page, write it (whole or not at all)."""
    facts = [store_facts(s) for s in summary.get("stores", [])]
    write_page(path, scan_page(summary, facts))
