"""Integrity of a store without a JVM: checks (``mqtool verify``), what RocketMQ's recovery
would cut at the next start, and a repaired copy (``mqtool repair``).

``Report`` and ``verify`` (:mod:`.checks`) load on first use, so that a module of the package
(``integrity.pop``, ``integrity.dispatch_rules``) is imported without the whole of verify and numba.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqtool.integrity.checks import Report, verify

__all__ = ["Report", "verify"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mqtool.integrity import checks

        return getattr(checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
