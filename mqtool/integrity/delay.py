"""``mqtool verify``'s delay-level step: which levels the store was written with, where they
came from, and a warning for every level ``--delay-levels`` / ``--broker-conf`` contradicts.

The evidence and the resolution live in :mod:`mqtool.delaylevels` (shared with ``inspect`` and
``trace``); this module only hands its findings to verify's report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqtool.delaylevels import DelayLevels, resolve_delay_levels
from mqtool.integrity.verify_report import FindingSink
from mqtool.store.reader import Store


def check_delay_levels(
    store: Store, sink: FindingSink, delay_levels: str | None = None,
    broker_conf: str | Path | None = None,
) -> DelayLevels:
    """Resolve the levels for ``store`` and add their findings (warnings, info) to ``sink``."""
    levels = resolve_delay_levels(store, delay_levels, broker_conf)
    for f in levels.findings:
        sink.add(f)
    return levels


def delay_summary(levels: DelayLevels) -> dict[str, Any]:
    """The ``delayLevels`` entry of verify's summary."""
    return levels.to_json()
