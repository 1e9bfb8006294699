"""Kept for old imports: Java ``String.hashCode`` lives in :mod:`mqtool.formats.javacompat`."""

from __future__ import annotations

from mqtool.formats.javacompat import java_string_hash

__all__ = ["java_string_hash"]
