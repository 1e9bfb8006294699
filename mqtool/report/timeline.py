"""``mqtool trace --html``: a message's journey on a time axis.

Built only from the trace command's JSON document (what ``mqtool trace --json`` prints: one
trace ``{"id", "verdict", "hops": [...]}`` or, with ``--key``, ``{"key", "traces": [...]}``),
never from the trace internals. Hops are marks at their store time, delays are spans from the
store time to the due time, pending and overdue copies are hatched spans, the store's "now" is a
line, dead-lettered and resent copies have their own marks.
"""

from __future__ import annotations

import itertools
from typing import Any

from mqtool.report import charts
from mqtool.report.page import Page, esc, write_page
from mqtool.timefmt import fmt_time as utc  # the one way mqtool shows a time

__all__ = ["trace_page", "traces_of", "timeline_svg", "write_page"]

KIND_COLOR = {
    "original": "#0072B2",
    "schedule": "#E69F00",
    "timer": "#E69F00",
    "retry": "#56B4E9",
    "pop-retry": "#56B4E9",
    "delivered": "#009E73",
    "dlq": "#D62728",
    "resend": "#CC79A7",
    "half": "#6A51A3",
    "op": "#6A51A3",
    "commit": "#009E73",
}
KIND_MARKER = {"dlq": "X", "resend": "D", "schedule": "s", "timer": "s", "original": "o"}
PENDING_STATES = ("pending", "overdue", "never-delivered")  # not delivered (yet)


def traces_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The traces in a ``trace --json`` document (one, or several with ``--key``)."""
    if "traces" in doc:
        return list(doc["traces"])
    return [doc]


def _fmt_secs(s: float) -> str:
    """Seconds since the first record as a tick label: ``+0``, ``+250ms``, ``+1m 30s``."""
    sign = "-" if s < 0 else "+"
    a = abs(s)
    if a == 0:
        return "0"
    if a < 1:
        return f"{sign}{a * 1000:.0f}ms"
    if a < 60:
        return f"{sign}{a:.3g}s"
    parts = []
    rest = int(round(a))
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return sign + " ".join(parts[:2])


def _fmt_ms(ms: int | None) -> str:
    return "-" if ms is None else _fmt_secs(ms / 1000).lstrip("+")


_LOG_TICKS = [0, 1, 10, 60, 600, 3600, 6 * 3600, 86_400, 7 * 86_400, 30 * 86_400, 365 * 86_400]


def timeline_svg(tr: dict[str, Any]) -> str:
    """The journey of one trace as an SVG chart."""
    from matplotlib.colors import to_rgba
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    hops = tr["hops"]
    t0 = min(h["storeTimestamp"] for h in hops)

    def x(ms: int) -> float:
        return float(ms - t0) / 1000.0

    points = [x(h["storeTimestamp"]) for h in hops]
    points += [x(h["deliverTimestamp"]) for h in hops if h.get("deliverTimestamp") is not None]
    points.append(x(tr["now"]))
    lo, hi = min(points + [0.0]), max(points + [0.0])
    span = hi - lo
    ordered = sorted(points)
    gaps = sorted(b - a for a, b in itertools.pairwise(ordered) if b > a)
    # Seconds-apart retries next to an hour-long delay: a linear axis would crush the retries.
    log_axis = span > 300 and bool(gaps) and gaps[0] < span / 200

    n = len(hops)
    with charts.figure(10.0, max(2.4, 0.42 * n + 1.5)) as fig:
        ax = fig.add_subplot()
        kinds_seen: list[str] = []
        delay_drawn = pending_drawn = False
        for i, h in enumerate(hops):
            kind = h["kind"]
            color = KIND_COLOR.get(kind, "#555555")
            if kind not in kinds_seen:
                kinds_seen.append(kind)
            xs = x(h["storeTimestamp"])
            due = h.get("deliverTimestamp")
            if due is not None:
                pending = h.get("state") in PENDING_STATES
                xd = x(due)
                ax.barh(
                    i, xd - xs, left=xs, height=0.42, color=to_rgba(color, 0.1 if pending else 0.3),
                    edgecolor=color, hatch="///" if pending else None, linewidth=0.8,
                )
                ax.plot([xd], [i], marker="|", markersize=16, color=color, markeredgewidth=2)
                label = f"due {utc(due)[11:]}"
                if pending:
                    label = f"{h['state']}: {label}"
                    pending_drawn = True
                else:
                    delay_drawn = True
                ax.annotate(label, (xd, i), xytext=(6, -3), textcoords="offset points",
                            fontsize=8, color="#333333", va="center")
            if i + 1 < n:
                ax.plot([xs, x(hops[i + 1]["storeTimestamp"])], [i, i + 1], color="#afb8c1",
                        linewidth=1, zorder=1)
            ax.plot([xs], [i], marker=KIND_MARKER.get(kind, "o"), markersize=9, color=color,
                    markeredgecolor="white", markeredgewidth=0.8, zorder=3, linestyle="none")
        now = x(tr["now"])
        ax.axvline(now, color="#cf222e", linestyle="--", linewidth=1)
        ax.annotate(f"now ({tr.get('nowSource', '')})", (now, -0.6), color="#cf222e",
                    fontsize=8, ha="right", va="bottom", xytext=(-3, 0),
                    textcoords="offset points", annotation_clip=False)
        ax.set_yticks(range(n))
        ax.set_yticklabels([
            f"{i + 1}. {h['kind']} · {h['topic']} q{h['queueId']}@{h['queueOffset']}"
            for i, h in enumerate(hops)
        ])
        ax.set_ylim(n - 0.4, -0.9)
        ax.grid(axis="y", visible=False)
        if log_axis:
            ax.set_xscale("symlog", linthresh=1.0, linscale=0.6)
            ticks = [t for t in _LOG_TICKS if lo <= t <= hi * 1.05]
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_locator(FixedLocator([]))
            scale_note = " (log scale past 1 s)"
        else:
            ax.xaxis.set_major_locator(MaxNLocator(nbins=9))
            scale_note = ""
        right = hi + max(span * 0.18, 0.5) if not log_axis else hi * 4 + 2
        ax.set_xlim(lo - max(span * 0.02, 0.05) if not log_axis else -0.05, right)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: _fmt_secs(v)))
        ax.set_xlabel(f"time since the first record, {utc(t0)} UTC{scale_note}")
        handles: list[Any] = [
            Line2D([], [], marker=KIND_MARKER.get(k, "o"), color=KIND_COLOR.get(k, "#555555"),
                   linestyle="none", markersize=8, label=k)
            for k in kinds_seen
        ]
        if delay_drawn:
            handles.append(Patch(facecolor=to_rgba("#999999", 0.35), edgecolor="#999999",
                                 label="delay (stored → due)"))
        if pending_drawn:
            handles.append(Patch(facecolor="white", edgecolor="#777777", hatch="///",
                                 label="still pending"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        return charts.svg(fig)


def _trace_section(page: Page, tr: dict[str, Any], number: int, total: int) -> None:
    title = f"Journey {number} of {total}: {tr['id']}" if total > 1 else f"Journey {tr['id']}"
    page.h2(title, anchor=f"trace-{number}")
    page.raw(
        f'<div class="verdict {esc(tr.get("verdictKind"))}">{esc(tr.get("verdict"))}</div>'
    )
    hops = tr["hops"]
    kinds = [h["kind"] for h in hops]
    page.cards([
        ("records", len(hops), ""),
        ("retries", kinds.count("retry") + kinds.count("pop-retry"), ""),
        ("dead-lettered", kinds.count("dlq"), "bad" if "dlq" in kinds else ""),
        ("resent", kinds.count("resend"), ""),
        ("pending", sum(h.get("state") in PENDING_STATES for h in hops),
         "warn" if any(h.get("state") in PENDING_STATES for h in hops) else ""),
    ])
    page.raw(
        f'<p class="note">UNIQ_KEY <code>{esc(tr.get("uniqKey"))}</code> · found via '
        f'{esc(tr.get("via"))} · now {esc(utc(tr.get("now")))} UTC '
        f'({esc(tr.get("nowSource"))})</p>'
    )
    if tr.get("resendCommand"):
        page.raw(f'<p>Resend it:</p><pre class="cmd">{esc(tr["resendCommand"])}</pre>')
    elif tr.get("resentTo"):
        page.raw(f'<p>Resent already: the copy is {esc(tr["resentTo"])}.</p>')
    for note in tr.get("notes") or []:
        page.note(note)
    if hops:
        page.figure(timeline_svg(tr))
    rows: list[list[Any]] = []
    classes: list[list[str]] = []
    day = utc(hops[0]["storeTimestamp"])[:10] if hops else ""
    with_consumers = any(h.get("consumers") for h in hops)
    for i, h in enumerate(hops, 1):
        delay = ""
        if h.get("delayLevel") is not None and h["kind"] in (
            "schedule", "retry", "delivered", "pop-retry"
        ):
            delay = f"level {h['delayLevel']}"
            if h.get("delayMs") is not None:
                delay += f" ({_fmt_ms(h['delayMs'])})"
        if h.get("deliverTimestamp") is not None:
            delay += (", " if delay else "") + "due " + _on(day, h["deliverTimestamp"])
        stored = _on(day, h["storeTimestamp"])
        if h.get("sincePreviousMs") is not None:
            stored += f" (+{_fmt_ms(h['sincePreviousMs'])})"
        detail = h.get("stateDetail") or ""
        if h.get("note"):
            detail += f" · {h['note']}"
        row = [i, h["kind"], h["topic"], f"q{h['queueId']}@{h['queueOffset']}", stored,
               h["reconsumeTimes"], delay, h.get("state"), detail]
        cls = ["", "", "", "nowrap", "", "", "", f"state-{h.get('state')}", ""]
        if with_consumers:
            row.append(", ".join(f"{c['group']}@{c['offset']}{' ✓' if c['consumed'] else ''}"
                                 for c in h.get("consumers") or []))
            cls.append("")
        row.append(h.get("offsetMsgId"))
        cls.append("mono id")
        rows.append(row)
        classes.append(cls)
    page.table(
        ["#", "kind", "topic", "queue@offset", f"stored (UTC, {day})", "reconsume",
         "delay, due (UTC)", "state", "detail"] + (["consumers"] if with_consumers else [])
        + ["offsetMsgId"],
        rows, cell_class=classes,
    )
    pops = [(i, c) for i, h in enumerate(hops, 1) for c in h.get("popCheckouts") or []]
    if pops:
        page.raw(f"<p>POP checkouts ({len(pops)}, from the checkpoint and ack records in "
                 "rmq_sys_REVIVE_LOG and the timer):</p>")
        page.table(["record #", "group", "checked out (UTC)", "invisible until (UTC)", "state",
                    "detail", "checkpoint record"],
                   [[i, c["group"], _on(day, c["popTime"]), _on(day, c["invisibleUntil"]),
                     c["state"], c["detail"], f"commitlog {c['checkpointRecord']}"]
                    for i, c in pops],
                   cell_class=[["", "", "", "", f"state-{c['state']}", "", "mono"]
                               for _, c in pops])
    client = tr.get("clientTrace") or []
    if client:
        page.raw(f"<p>What the clients reported ({len(client)} events in RMQ_SYS_TRACE_TOPIC, "
                 "by the clients' clocks):</p>")
        page.table(["client time (UTC)", "event", "detail", "trace record"],
                   [[_on(day, e["timestamp"]) if e.get("timestamp") is not None else "",
                     e["what"], e["summary"], f"commitlog {e['traceRecordOffset']}"]
                    for e in client])


def _on(day: str, ms: int) -> str:
    """A time of the journey: the time of day alone on the journey's first ``day``."""
    text = utc(ms)
    return text[11:] if text.startswith(day) else text


def trace_page(doc: dict[str, Any], problems: list[str] | None = None) -> str:
    """The HTML page of a ``trace --json`` document; the document is embedded unchanged.

    ``problems``: what the read found wrong with the store (shown first, in red).
    """
    traces = traces_of(doc)
    if "key" in doc:
        title = f"mqtool trace --key {doc['key']}"
        sub = f"{len(traces)} journey(s) with KEYS {doc['key']}" + (
            f" in topic {doc['topic']}" if doc.get("topic") else "")
    else:
        title = f"mqtool trace {doc.get('id')}"
        sub = "one message's journey through the store"
    page = Page(title=title, subtitle=sub, data=doc)
    page.problems(problems or [])
    if not traces:
        page.note("no journey found")
    for i, tr in enumerate(traces, 1):
        _trace_section(page, tr, i, len(traces))
    return page.render()
