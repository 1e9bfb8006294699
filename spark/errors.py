"""Errors of the Spark adapter: the exception hierarchy of :mod:`mqtool.formats.errors`, one
layer up (the same concept at two layers)."""

from __future__ import annotations

from mqtool.formats.errors import EXIT_ENVIRONMENT, MqtoolError


class SparkScanError(MqtoolError):
    """A scan that cannot run as asked (bad option, unreadable store, failed Spark job).

    Exits 3 (environment: Spark or Java failed), or 2 when raised through
    :func:`mqtool.formats.errors.usage` (an option that is wrong)."""

    exit_status = EXIT_ENVIRONMENT
