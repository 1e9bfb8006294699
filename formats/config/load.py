"""Config files as the broker loads them: ``ConfigManager#load`` / ``loadBak``, the one loader.

RocketMQ ``ConfigManager.load()`` reads ``config/<name>``; when the text is null (missing file)
or of length 0 it calls ``loadBak()``; when ``decode`` throws it also calls ``loadBak()``, which
reads ``<name>.bak`` and decodes it when it is non-empty (a missing or empty ``.bak`` loads
nothing and still counts as loaded; a ``.bak`` that cannot be decoded fails the load). So an
empty or garbled file with a good ``.bak`` is a normal crash state: the broker starts from the
``.bak``. :func:`load_config` says what the broker would load and why, as findings (kinds
``config`` and ``bad-config``, files relative to the store root); it never writes.

Every reader of ``config/*.json`` (inspect, trace, dlq, scan, verify, the reference store) loads
through here, so they all see the same content.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqtool.formats.errors import Finding, FormatError, Severity


def _parser(module: str, name: str) -> Callable[..., Any]:
    """The parser ``name`` of ``mqtool.formats.config.<module>``, imported when first called
    (a store without a file costs no import of its model)."""

    def parse(*args: Any, **kwargs: Any) -> Any:
        fn: Callable[..., Any] = getattr(
            importlib.import_module(f"mqtool.formats.config.{module}"), name)
        return fn(*args, **kwargs)

    parse.__name__ = parse.__qualname__ = name
    return parse


#: The broker config files mqtool reads, with their parsers.
CONFIG_PARSERS: dict[str, Callable[..., Any]] = {
    "delayOffset.json": _parser("delay_offset", "parse_delay_offset"),
    "consumerOffset.json": _parser("consumer_offset", "parse_consumer_offset"),
    "lmqConsumerOffset.json": _parser("consumer_offset", "parse_consumer_offset"),
    "topics.json": _parser("topics", "parse_topics"),
    "subscriptionGroup.json": _parser("subscription_group", "parse_subscription_groups"),
}


START_CONFIGS = frozenset({
    "topics.json", "topicQueueMapping.json", "consumerOffset.json", "subscriptionGroup.json",
    "consumerFilter.json", "consumerOrderInfo.json", "delayOffset.json",
})
"""The config files a broker loads as it starts (``BrokerController#initialize``, 4.9.7 and
5.3.3, and the schedule service's ``delayOffset.json``), each with ``ConfigManager#load``: a
file it cannot decode falls back to its ``.bak``, and a ``.bak`` it cannot decode either fails
the load, and with it the start. (``lmqConsumerOffset.json`` is one of them on a broker with
``enableLmq``: :mod:`mqtool.store.consumer_offsets` knows when.)"""


@dataclass
class ConfigLoad:
    """What the broker would load for one config file."""

    name: str  # e.g. "delayOffset.json"
    value: Any = None  # the parsed content (None: nothing loaded)
    source: str | None = None  # "config/<name>" or "config/<name>.bak" (None: nothing loaded)
    text: str | None = None  # the text that was parsed
    findings: list[Finding] = field(default_factory=list)
    unloadable: bool = False  # neither the file nor its .bak decodes: ConfigManager#load fails

    @property
    def from_bak(self) -> bool:
        return self.source is not None and self.source.endswith(".bak")


def _read(path: Path) -> tuple[str | None, str | None]:
    """(text, None) or (None, why); a missing file gives (None, "missing")."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except IsADirectoryError:
        return None, "is a directory"
    except OSError as e:
        return None, f"cannot be read: {e.strerror}"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 at byte {e.start}"


def load_config(
    root: str | Path, name: str, parse: Callable[..., Any] | None = None
) -> ConfigLoad:
    """Load ``<root>/config/<name>`` the broker's way.

    ``parse(text, file=...)`` decodes it (default: the parser of :data:`CONFIG_PARSERS`).
    """
    if parse is None:
        parse = CONFIG_PARSERS[name]
    root = Path(root)
    rel = f"config/{name}"
    out = ConfigLoad(name)
    text, why = _read(root / "config" / name)
    bad_at: int | None
    if text is not None and len(text) > 0:
        try:
            out.value = parse(text, file=rel)
            out.source, out.text = rel, text
            return out
        except FormatError as e:
            why = f"cannot be parsed: {e.detail}"
            bad_at = e.offset
    else:
        bad_at = 0 if why != "missing" else None
        why = why or "empty (0 bytes)"
    bak_rel = rel + ".bak"
    bak_text, bak_why = _read(root / "config" / (name + ".bak"))
    if why == "missing" and bak_text is None:
        return out  # neither file: nothing to load, nothing wrong
    if bak_text:
        try:
            out.value = parse(bak_text, file=bak_rel)
            out.source, out.text = bak_rel, bak_text
        except FormatError as e:
            out.unloadable = True
            stops = (": the broker does not start" if name in START_CONFIGS
                     else ": ConfigManager#load fails on it")
            out.findings.append(Finding(
                "bad-config", bak_rel, e.offset,
                f"{rel} {why} and its .bak cannot be parsed either ({e.detail}){stops}",
                severity=Severity.ERROR,
            ))
            return out
        # the .bak is the previous version: what was saved after it is lost at restart
        sev = Severity.ERROR if why != "missing" else Severity.WARNING
        kind = "bad-config" if why.startswith("cannot be parsed") else "config"
        out.findings.append(Finding(
            kind, rel, bad_at, f"{why}; the broker loads {bak_rel} instead", severity=sev,
        ))
        return out
    out.findings.append(Finding(
        "bad-config" if why.startswith("cannot be parsed") else "config", rel, bad_at,
        f"{why} and no usable {bak_rel} ({bak_why or 'empty'}): the broker loads nothing",
        severity=Severity.ERROR,
    ))
    return out
