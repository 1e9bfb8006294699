"""Errors of the Spark adapter (part of mqtool's one exception hierarchy)."""

from __future__ import annotations

from mqtool.formats.errors import MqtoolError


class SparkScanError(MqtoolError):
    """A scan that cannot run as asked (bad option, unreadable store, failed Spark job)."""
