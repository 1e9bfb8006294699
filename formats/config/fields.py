"""The fields the config models share: ``DataVersion`` and typed readers of JSON fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.config.fastjson import loads_fastjson
from mqtool.formats.errors import FormatError

# --------------------------------------------------------------------------------------------
# Typed records


@dataclass(frozen=True, slots=True)
class DataVersion:
    """``org.apache.rocketmq.remoting.protocol.DataVersion`` (timestamp in epoch ms)."""

    counter: int
    timestamp: int
    state_version: int | None = 0  # None: field absent (older brokers)
    # fields of a newer broker, kept as read: fastjson ignores what its bean lacks
    extra: Mapping[str, Any] | None = field(default=None, hash=False)

    def to_json_obj(self) -> dict[str, Any]:
        """Bean fields in fastjson's (alphabetical) order."""
        obj: dict[str, Any] = {"counter": self.counter}
        if self.state_version is not None:
            obj["stateVersion"] = self.state_version
        obj["timestamp"] = self.timestamp
        return with_extra(obj, self.extra)

    @classmethod
    def from_json_obj(cls, obj: Any, *, file: str | None = None) -> DataVersion:
        """Read a ``dataVersion`` object (``counter`` and ``timestamp`` required)."""
        if not isinstance(obj, Mapping):
            raise FormatError(file, None, f"dataVersion: expected an object, found {obj!r}")
        counter = int_field(obj, "counter", file, "dataVersion")
        timestamp = int_field(obj, "timestamp", file, "dataVersion")
        state = obj.get("stateVersion")
        if state is not None and not is_int(state):
            raise FormatError(
                file, None, f"dataVersion.stateVersion: expected int, found {state!r}"
            )
        return cls(counter=counter, timestamp=timestamp, state_version=state,
                   extra=extra_fields(obj, ("counter", "timestamp", "stateVersion")))


def extra_fields(obj: Mapping[Any, Any], known: tuple[str, ...]) -> dict[str, Any] | None:
    """The fields of a config object beyond ``known`` (a newer broker's; fastjson ignores
    what its bean lacks, and so does the broker), None when there are none."""
    extra = {k: v for k, v in obj.items() if k not in known}
    return extra or None


def with_extra(obj: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``obj`` with ``extra`` fields, every key in fastjson's (alphabetical) bean order."""
    if not extra:
        return obj
    both = {**obj, **{str(k): v for k, v in extra.items()}}
    return {k: both[k] for k in sorted(both)}


def is_int(v: object) -> bool:
    """Whether a JSON value is an integer (``true``/``false`` are not)."""
    return isinstance(v, int) and not isinstance(v, bool)


def int_field(obj: Mapping[Any, Any], name: str, file: str | None, where: str) -> int:
    """The integer ``obj[name]`` (``FormatError`` naming ``where`` when it is not one)."""
    v = obj.get(name)
    if not is_int(v):
        raise FormatError(file, None, f"{where}.{name}: expected int, found {v!r}")
    assert isinstance(v, int)
    return v


def load_object(text: str, file: str | None, what: str) -> Mapping[Any, Any]:
    """A config file's text as its top-level JSON object (fastjson's dialect)."""
    obj = loads_fastjson(text, file=file)
    if not isinstance(obj, Mapping):
        raise FormatError(file, 0, f"{what}: expected a JSON object at top level")
    return obj


def _int_key(k: Any) -> Any:
    """A map key as fastjson reads it into a ``Map<Integer, Long>``: a quoted decimal integer
    (``"0"``, as fastjson's ``BrowserCompatible`` writes and other tools do) is the int."""
    if not isinstance(k, str):
        return k
    digits = k[1:] if k[:1] in ("+", "-") else k
    if digits.isdecimal() and -(1 << 31) <= int(k) < 1 << 31:  # Integer.parseInt's range
        return int(k)
    return k


def int_table(obj: Any, file: str | None, where: str) -> dict[int, int]:
    """An ``{<int>: <int>}`` object (a delay level's or a queue's offset table); keys may be
    quoted (``{"0": 7}``), as the broker's fastjson reads them."""
    if not isinstance(obj, Mapping):
        raise FormatError(file, None, f"{where}: expected an object, found {obj!r}")
    table: dict[int, int] = {}
    for k, v in obj.items():
        k = _int_key(k)
        if not is_int(k) or not is_int(v):
            raise FormatError(
                file, None, f"{where}: expected <int>:<int> entries, found {k!r}:{v!r}"
            )
        table[k] = v
    return table
