"""Arrow columns of the ``messages`` table, built from the record kernel's buffers.

The compiled kernel (:mod:`mqtool.formats.commitlog_fields`) decodes and checks every record of a
commitlog window into a field table and cuts the strings out as Arrow buffers (offsets + data);
this module wraps those buffers as Arrow arrays without copying them again and adds what is
per distinct value (host strings, magic and compression names). No pyspark here.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool.formats import commitlog_fields as fields
from mqtool.formats.commitlog import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_NAMES,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from mqtool.formats.commitlog_layout import BORNHOST_AT


def strings(offsets: np.ndarray, data: np.ndarray, typ: pa.DataType | None = None) -> pa.Array:
    """An Arrow string (or ``typ``) array over int32 ``offsets`` and ``data``, no copy."""
    n = len(offsets) - 1
    return pa.Array.from_buffers(
        typ or pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def gathered(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
             typ: pa.DataType | None = None) -> pa.Array:
    """``a[s:s+l]`` for every (s, l) as one Arrow string array (the kernel copies once)."""
    off, data = fields.gather(a, starts, lengths)
    return strings(off, data, typ)


def host_strings(a: np.ndarray, ip4: np.ndarray, v6: np.ndarray, ip_pos: np.ndarray,
                 port: np.ndarray) -> pa.Array:
    """``ip:port`` / ``[v6]:port`` per row (as :class:`HostPort` prints them).

    Hosts repeat: each distinct one is formatted once.
    """
    n = len(port)
    if n and not v6.any():  # IPv4 only: one uint64 per (ip, port), usually a single value
        key = (ip4.astype(np.uint64) << np.uint64(32)) | (port & 0xFFFFFFFF).astype(np.uint64)

        def v4(k: int) -> str:
            ip, p = k >> 32, k & 0xFFFFFFFF
            p = p - (1 << 32) if p & 0x80000000 else p
            return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}:{p}"

        if (key == key[0]).all():
            return pa.repeat(v4(int(key[0])), n)
        u, inv = np.unique(key, return_inverse=True)
        return pa.array([v4(int(k)) for k in u], pa.string()).take(
            pa.array(inv.reshape(-1).astype(np.int32))
        )
    texts: dict[tuple[bytes, int], str] = {}
    out = []
    for i in range(n):
        width = 16 if v6[i] else 4
        k = (bytes(a[ip_pos[i] : ip_pos[i] + width]), int(port[i]))
        t = texts.get(k)
        if t is None:
            if width == 16:
                t = f"[{ipaddress.IPv6Address(k[0])}]:{k[1]}"
            else:
                b = k[0]
                t = f"{b[0]}.{b[1]}.{b[2]}.{b[3]}:{k[1]}"
            texts[k] = t
        out.append(t)
    return pa.array(out, pa.string())


def magic_strings(magic: np.ndarray) -> pa.Array:
    """``"0xdaa320a7"`` / ``"0xdaa320ab"`` per row (as ``mqtool messages --json`` shows it)."""
    names = pa.array([f"{MAGIC_V1:#010x}", f"{MAGIC_V2:#010x}"], pa.string())
    return names.take(pa.array((magic == MAGIC_V2).astype(np.int8)))


_COMPRESSION_NAMES = pa.array(
    [COMPRESSION_NAMES.get(i, "ZLIB") for i in range(8)], pa.string()
)


def compression_types(sysflag: np.ndarray) -> pa.Array:
    """ZLIB / LZ4 / ZSTD for compressed bodies (sysFlag bits 8-10), null otherwise."""
    kind = (sysflag >> 8) & 7
    compressed = (sysflag & COMPRESSED_FLAG) != 0
    return _COMPRESSION_NAMES.take(pa.array(kind, mask=~compressed))


def property_maps_at(
    a: np.ndarray, starts: np.ndarray, lengths: np.ndarray, splitter: fields.PropertySplitter,
    valid: np.ndarray | None = None,
) -> tuple[pa.Array, dict[str, pa.Array]]:
    """``MessageDecoder#string2messageProperties`` of the properties strings at ``starts``.

    Returns the ``map<string,string>`` array (last duplicate wins, as in the Java HashMap) and,
    for TAGS / KEYS / UNIQ_KEY, a string array with the value or null per row. Rows where
    ``valid`` is false are null maps (their strings are not read).
    """
    n = len(starts)
    lengths = lengths if valid is None else np.where(valid, lengths, 0)
    map_off, k_off, k_data, v_off, v_data, picked = splitter.split(a, starts, lengths)
    keys = strings(k_off, k_data)
    values = strings(v_off, v_data)
    mask = None if valid is None else pa.array(~valid)
    maps = pa.MapArray.from_arrays(pa.array(map_off), keys, values, mask=mask)
    out: dict[str, pa.Array] = {}
    for j, name in enumerate(fields.PICK_NAMES):
        idx = picked[j]
        out[name] = values.take(pa.array(idx, mask=idx < 0)) if n else pa.nulls(0, pa.string())
    return maps, out


def property_maps(props: pa.Array) -> tuple[pa.Array, dict[str, pa.Array]]:
    """:func:`property_maps_at` over a string array (tests, ad-hoc use)."""
    props = props.cast(pa.string())
    n = len(props)
    offsets = np.frombuffer(props.buffers()[1], dtype=np.int32)[props.offset : props.offset + n + 1]
    data_buf = props.buffers()[2]
    a = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    return property_maps_at(a, starts, lengths, fields.PropertySplitter(max(16, 2 * n)))


def message_columns(
    a: np.ndarray, f: np.ndarray, *, store: str, name: str, want: frozenset[str],
    properties_for: tuple[str, ...], splitter: fields.PropertySplitter,
) -> dict[str, Any]:
    """Arrow arrays of the wanted ``messages`` columns for the kernel's field table ``f``.

    ``properties_for``: compute ``properties`` only for topics with these prefixes (when tags,
    keys and uniqKey are not wanted), null elsewhere.
    """
    n = f.shape[1]
    sysflag = f[fields.F_SYS_FLAG]
    out: dict[str, Any] = {}
    topics = None
    if "topic" in want or properties_for:
        topics = gathered(a, f[fields.F_TOPIC_POS], f[fields.F_TOPIC_LEN])

    def i32(k: int) -> pa.Array:
        return pa.array(f[k].astype(np.int32))

    def i64(k: int) -> pa.Array:
        return pa.array(f[k].copy())  # the field table is reused for the next window

    lazy: dict[str, Any] = {
        "store": lambda: pa.repeat(store, n),
        "file": lambda: pa.repeat(name, n),
        "fileOffset": lambda: i64(fields.F_POS),
        "commitLogOffset": lambda: i64(fields.F_PHYS),
        "storeSize": lambda: i32(fields.F_SIZE),
        "magic": lambda: magic_strings(f[fields.F_MAGIC]),
        "topic": lambda: topics,
        "queueId": lambda: i32(fields.F_QUEUE_ID),
        "queueOffset": lambda: i64(fields.F_QUEUE_OFFSET),
        "flag": lambda: i32(fields.F_FLAG),
        "sysFlag": lambda: i32(fields.F_SYS_FLAG),
        "bodyCRC": lambda: i32(fields.F_BODY_CRC),
        "bornTimestamp": lambda: i64(fields.F_BORN_TS),
        "bornHost": lambda: host_strings(
            a, f[fields.F_BORN_IP4], (sysflag & BORNHOST_V6_FLAG) != 0,
            f[fields.F_POS] + BORNHOST_AT,
            f[fields.F_BORN_PORT],
        ),
        "storeTimestamp": lambda: i64(fields.F_STORE_TS),
        "storeHost": lambda: host_strings(
            a, f[fields.F_STORE_IP4], (sysflag & STOREHOSTADDRESS_V6_FLAG) != 0,
            f[fields.F_STORE_IP_POS], f[fields.F_STORE_PORT],
        ),
        "reconsumeTimes": lambda: i32(fields.F_RECONSUME),
        "preparedTransactionOffset": lambda: i64(fields.F_PREPARED),
        "bodyLength": lambda: i32(fields.F_BODY_LEN),
        "propertiesRaw": lambda: gathered(a, f[fields.F_PROPS_POS], f[fields.F_PROPS_LEN]),
        "offsetMsgId": lambda: strings(*fields.msg_ids_of(
            a, f[fields.F_STORE_IP_POS], (sysflag & STOREHOSTADDRESS_V6_FLAG) != 0,
            f[fields.F_STORE_PORT], f[fields.F_PHYS],
        )),
        "crcOk": lambda: pa.array(f[fields.F_CRC_OK] == 1, mask=f[fields.F_CRC_OK] < 0),
        "compressionType": lambda: compression_types(sysflag),
    }
    if want & {"properties", "tags", "keys", "uniqKey"}:
        valid = None
        if properties_for and not want & {"tags", "keys", "uniqKey"}:
            valid = np.zeros(n, dtype=bool)
            for prefix in properties_for:
                valid |= np.asarray(pc.starts_with(topics, prefix), dtype=bool)
        maps, picked = property_maps_at(
            a, f[fields.F_PROPS_POS], f[fields.F_PROPS_LEN], splitter, valid
        )
        named = {"properties": maps, "tags": picked["TAGS"], "keys": picked["KEYS"],
                 "uniqKey": picked["UNIQ_KEY"]}
        out.update({k: v for k, v in named.items() if k in want})
    for key, make in lazy.items():
        if key in want and key not in out:
            out[key] = make()
    return out
