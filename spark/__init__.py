"""The Spark adapter of mqtool: ``mqtool scan`` and its audits (imported as ``mqtool.spark``).

This package is the only place that imports pyspark, and it does so lazily: importing
``mqtool.spark`` (or :mod:`mqtool.spark.decode`, :mod:`mqtool.spark.splits`,
:mod:`mqtool.spark.schema`) never loads pyspark. Modules that need a SparkSession
(:mod:`~mqtool.spark.source`, :mod:`~mqtool.spark.audits`, :mod:`~mqtool.spark.scan`) import it
when they are imported themselves, and the CLI imports them only inside the ``scan`` command.
"""

from __future__ import annotations

from mqtool.spark.errors import SparkScanError

AUDITS = ("queues", "rate", "dlq", "retry", "schedule", "integrity", "lag", "pop", "timer")
"""Every audit ``mqtool scan`` knows, in the order the summary shows them (the one list: the
command line's ``--audits`` and :func:`mqtool.spark.scan.run_scan` check names against it)."""

__all__ = ["AUDITS", "SparkScanError"]
