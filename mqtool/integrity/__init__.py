"""Integrity of a store without a JVM: checks (``mqtool verify``), what RocketMQ's recovery
would cut at the next start, and a repaired copy (``mqtool repair``)."""

from __future__ import annotations

from mqtool.integrity.checks import Report, verify

__all__ = ["Report", "verify"]
