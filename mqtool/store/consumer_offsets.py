"""The consumer offsets a broker would load from a store, from wherever it keeps them.

RocketMQ 5.3.3's ``BrokerController`` picks the offsets manager by the store's options, and
each keeps the offsets in a place of its own under ``config/``:

* ``storeType=defaultRocksDB``: ``RocksDBConsumerOffsetManager``, a RocksDB database at
  ``config/consumerOffsets/``: key ``<topic>@<group>`` (UTF-8), value fastjson
  ``{"offsetTable":{<queueId>:<offset>}}`` in the ``default`` column family, the data version
  under ``kvDataVersionKey`` in ``kvDataVersion``. At load it takes ``consumerOffset.json``
  (or its ``.bak``) instead when that file's data version counter is the higher;
* ``enableLmq=true``: ``LmqConsumerOffsetManager``, ``config/lmqConsumerOffset.json``: the
  ``offsetTable`` of every group, and ``lmqOffsetTable`` (``<lmq topic>@<lmq group>`` -> one
  offset, queue 0) for the LMQ groups;
* otherwise ``ConsumerOffsetManager``, ``config/consumerOffset.json``.

``configManagerVersion=v2`` (``ConsumerOffsetManagerV2``) keeps every config table in one RocksDB
at ``config/rdb/`` with binary keys; that database is not read (a warning says so).

Which manager wrote a store shows in its files: a RocksDB database at
``config/consumerOffsets/``; ``lmqConsumerOffset.json`` without ``consumerOffset.json``. A store
with both JSON files is read from ``consumerOffset.json``, with a note naming the other
(a broker started with ``enableLmq=true`` loads that one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqtool.formats.config.load import ConfigLoad, load_config
from mqtool.formats.errors import Finding, FormatError, Severity

JSON_FILE = "consumerOffset.json"
LMQ_FILE = "lmqConsumerOffset.json"
ROCKSDB_DIR = "consumerOffsets"
V2_DIR = "rdb"  # ConfigStorage (configManagerVersion=v2): every config table in one RocksDB
KV_DATA_VERSION_CF = "kvDataVersion"  # ConfigRocksDBStorage.KV_DATA_VERSION_COLUMN_FAMILY_NAME
KV_DATA_VERSION_KEY = b"kvDataVersionKey"

Table = dict[tuple[str, str], dict[int, int]]
"""(topic, group) -> {queueId: next offset}."""


@dataclass
class ConsumerOffsetsLoad:
    """The offsets a broker would load, and where from."""

    source: str | None = None  # e.g. "config/consumerOffset.json(.bak)", "config/consumerOffsets/"
    table: Table | None = None  # None: nothing loads
    findings: list[Finding] = field(default_factory=list)
    json: ConfigLoad | None = None  # the JSON file read, when the offsets come from one


def _exists(cdir: Path, name: str) -> bool:
    return (cdir / name).exists() or (cdir / (name + ".bak")).exists()


def _json_table(loaded: ConfigLoad) -> Table:
    from mqtool.formats.config.consumer_offset import split_offset_key

    co = loaded.value
    table: Table = {}
    for key, queues in co.offset_table.items():
        table[split_offset_key(key)] = dict(queues)
    for key, offset in (co.lmq_offset_table or {}).items():
        if isinstance(key, str) and isinstance(offset, int) and not isinstance(offset, bool):
            table[split_offset_key(key)] = {0: offset}
        else:
            loaded.findings.append(Finding(
                "config", loaded.source or f"config/{loaded.name}", None,
                f"lmqOffsetTable: {key!r}: expected \"<topic>@<group>\": <offset>, "
                f"found {offset!r} (the entry is not read)"))
    return table


def _load_json(root: Path, name: str) -> ConsumerOffsetsLoad:
    loaded = load_config(root, name)
    out = ConsumerOffsetsLoad(source=loaded.source, json=loaded)
    if loaded.value is not None:
        out.table = _json_table(loaded)
    out.findings = loaded.findings
    return out


def _load_rocksdb(root: Path) -> ConsumerOffsetsLoad:
    from mqtool.formats.config.consumer_offset import split_offset_key
    from mqtool.formats.config.fastjson import loads_fastjson
    from mqtool.formats.config.fields import DataVersion, int_table
    from mqtool.store.rocksdb_queue import RocksOpenError, read_only

    rel = f"config/{ROCKSDB_DIR}/"
    out = ConsumerOffsetsLoad(source=rel, table={})
    counter = 0
    try:
        with read_only(root / "config" / ROCKSDB_DIR) as (db, cfs):
            for key, value in db.items():
                k = bytes(key).decode("utf-8", "replace")
                try:
                    obj: Any = loads_fastjson(bytes(value).decode("utf-8"), file=rel)
                    queues = int_table(obj.get("offsetTable") if hasattr(obj, "get") else None,
                                       rel, f"key {k!r}: offsetTable")
                except (FormatError, UnicodeDecodeError) as e:
                    detail = e.detail if isinstance(e, FormatError) else "not UTF-8"
                    out.findings.append(Finding(
                        "config", rel, None, f"consumer offsets of {k!r} cannot be read: "
                        f"{detail} (the broker fails to start on it)",
                        found=bytes(value)[:64].hex()))
                    continue
                out.table[split_offset_key(k)] = queues  # type: ignore[index]
            if KV_DATA_VERSION_CF in cfs:
                raw = db.get_column_family(KV_DATA_VERSION_CF).get(KV_DATA_VERSION_KEY)
                if raw:
                    try:
                        dv = DataVersion.from_json_obj(
                            loads_fastjson(bytes(raw).decode("utf-8"), file=rel), file=rel)
                        counter = dv.counter
                    except (FormatError, UnicodeDecodeError):
                        out.findings.append(Finding(
                            "config", rel, None, "kvDataVersion cannot be read (the broker fails "
                            "to start on it)", found=bytes(raw)[:64].hex()))
    except RocksOpenError as e:
        return ConsumerOffsetsLoad(source=None, table=None, findings=[Finding(
            "config", rel, None, f"RocksDB consumer offsets cannot be opened read-only: {e}")])
    # RocksDBConsumerOffsetManager#merge: the JSON file wins when its version is the newer
    if _exists(root / "config", JSON_FILE):
        js = _load_json(root, JSON_FILE)
        jdv = js.json.value.data_version if js.json is not None and js.json.value else None
        if jdv is not None and jdv.counter > counter:
            js.findings += out.findings
            return js
        out.findings += js.findings
    return out


def load_consumer_offsets(root: Path) -> ConsumerOffsetsLoad:
    """The consumer offsets of the store at ``root`` as its broker would load them (see the
    module doc); what went wrong is in ``findings``."""
    cdir = root / "config"
    if (cdir / V2_DIR).is_dir():
        return ConsumerOffsetsLoad(findings=[Finding(
            "config", f"config/{V2_DIR}/", None,
            "the broker keeps its topics, groups and consumer offsets in this RocksDB "
            "(configManagerVersion=v2); mqtool does not read it: no consumer offsets are shown",
            severity=Severity.WARNING)])
    if (cdir / ROCKSDB_DIR).is_dir():
        return _load_rocksdb(root)
    if _exists(cdir, LMQ_FILE) and not _exists(cdir, JSON_FILE):
        return _load_json(root, LMQ_FILE)
    out = _load_json(root, JSON_FILE)
    if _exists(cdir, LMQ_FILE):
        out.findings.append(Finding(
            "config", f"config/{LMQ_FILE}", None,
            f"read config/{JSON_FILE}; a broker started with enableLmq=true loads "
            f"config/{LMQ_FILE} instead", severity=Severity.INFO))
    return out
