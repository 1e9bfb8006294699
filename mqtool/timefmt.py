"""The one way mqtool shows a time: epoch ms as ``2026-11-21 21:02:52.375`` (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime


def fmt_time(ms: int | None) -> str:
    """Epoch ms as ``2026-11-21 21:02:52.375`` (UTC); ``-`` for none."""
    if ms is None or ms <= 0:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(ms)
