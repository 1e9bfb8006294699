"""Client message ids (``UNIQ_KEY``) as ``MessageClientIDSetter`` (4.6.0+) creates them.

Layout (hex, upper case): ``ip (4|16) | pid int16 | classLoader.hashCode() int32 |
(now - start of the current month) int32 ms | counter int16``: 32 hex chars for IPv4, 56 for IPv6.
The month starts in the producer JVM's default time zone; here the zone is a parameter (UTC by
default) and the clock is injectable, so ids are deterministic in tests.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import random
from collections.abc import Callable
from zoneinfo import ZoneInfo


def month_bounds(now_ms: int, tz: _dt.tzinfo) -> tuple[int, int]:
    """(start of the month containing ``now_ms``, start of the next month), epoch ms in ``tz``."""
    t = _dt.datetime.fromtimestamp(now_ms / 1000.0, tz)
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
        month=start.month + 1
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqKeyGenerator:
    """``MessageClientIDSetter.createUniqID()`` with an injectable clock.

    ``ip`` is the producer address (v4 or v6 text), ``pid`` and ``class_loader_hash`` the other
    fixed parts (random but seeded when omitted), ``clock`` returns epoch ms.
    """

    def __init__(
        self,
        ip: str = "127.0.0.1",
        *,
        pid: int | None = None,
        class_loader_hash: int | None = None,
        clock: Callable[[], int] | None = None,
        tz: str | _dt.tzinfo = "UTC",
        seed: int | None = None,
        counter: int = 0,
    ) -> None:
        rnd = random.Random(seed)
        self.ip = ip
        if pid is None:
            pid = rnd.getrandbits(15) if seed is not None else os.getpid()
        self.pid = pid
        self.class_loader_hash = (
            rnd.getrandbits(31) if class_loader_hash is None else class_loader_hash
        )
        self._clock: Callable[[], int] = clock or _now_ms
        self._tz: _dt.tzinfo = ZoneInfo(tz) if isinstance(tz, str) else tz
        fixed = (
            ipaddress.ip_address(ip).packed
            + (self.pid & 0xFFFF).to_bytes(2, "big")
            + (self.class_loader_hash & 0xFFFFFFFF).to_bytes(4, "big")
        )
        self.fix_string = fixed.hex().upper()
        self.counter = counter & 0xFFFF
        self._start = 0
        self._next_start = 0
        self._last_ms = -1
        self._last_part = ""
        self._set_start_time(self._clock())

    def _set_start_time(self, now_ms: int) -> None:
        self._start, self._next_start = month_bounds(now_ms, self._tz)

    def next_parts(self) -> tuple[str, str]:
        """(time part: 8 hex chars, counter part: 4 hex chars) of the next id."""
        current = self._clock()
        if current >= self._next_start:
            self._set_start_time(current)
        ctr = self.counter
        self.counter = (ctr + 1) & 0xFFFF
        if current != self._last_ms or current < self._start:
            self._last_ms = current
            self._last_part = f"{(current - self._start) & 0xFFFFFFFF:08X}"
        if not _COUNTER_HEX:
            _COUNTER_HEX.extend(f"{i:04X}" for i in range(0x10000))
        return self._last_part, _COUNTER_HEX[ctr]

    def create(self) -> str:
        """The next UNIQ_KEY."""
        t, c = self.next_parts()
        return self.fix_string + t + c


_COUNTER_HEX: list[str] = []  # "0000".."FFFF", built on first use


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
