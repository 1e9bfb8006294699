"""The compiled kernel of :mod:`mqtool.store.records_at`: whether a record starts exactly at
each of many commitlog offsets, and its fields. Imported when a read has enough offsets to pay
for loading numba (:data:`mqtool.store.records_at.KERNEL_MIN_UNITS`)."""

from __future__ import annotations

# isort: off
from mqtool.formats import jit  # first: it sets NUMBA_CACHE_DIR for numba
# isort: on
from typing import Any

import numba as nb
import numpy as np

from mqtool.formats import commitlog_fields


@nb.njit(cache=True, nogil=True)
def _scan_at(
    buf: np.ndarray, words: np.ndarray, pos: np.ndarray, file_start: int, out: np.ndarray,
    tables: np.ndarray,
) -> np.ndarray:
    """For each in-file position, :func:`commitlog_fields.scan` of exactly one record there (into
    ``out``'s column); whether the kernel accepted it."""
    n = pos.shape[0]
    ok = np.zeros(n, dtype=np.bool_)
    one = np.empty((out.shape[0], 1), dtype=np.int64)
    size = buf.shape[0]
    for i in range(n):
        p = pos[i]
        if p < 0 or p + 8 > size:
            continue
        count, _q, _status = commitlog_fields.scan(
            buf, words, p, p + 1, file_start, False, one, tables
        )
        if count == 1:
            ok[i] = True
            for k in range(out.shape[0]):
                out[k, i] = one[k, 0]
    return ok


def records_at(store: Any, phys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each commitlog offset in ``phys`` of ``store`` (a
    :class:`~mqtool.store.records_at.CommitLogReader`, which imports this module when it needs
    it): (index of its commitlog file in
    ``store.commitlog_files``, -1 when in none; whether the kernel accepts a record starting
    exactly there; the kernel's field table, ``N_FIELDS`` x len(phys), filled for accepted
    offsets, positions in-file)."""
    phys = np.asarray(phys, dtype=np.int64)
    n = len(phys)
    fields = commitlog_fields.field_table(n)
    ok = np.zeros(n, dtype=bool)
    files = store.commitlog_files
    fi = np.full(n, -1, dtype=np.int64)
    if not n or not files:
        return fi, ok, fields
    starts = np.array([f.start for f in files], dtype=np.int64)
    sizes = np.array([f.size for f in files], dtype=np.int64)
    k = np.searchsorted(starts, phys, side="right") - 1
    kc = np.maximum(k, 0)
    inside = (k >= 0) & (phys - starts[kc] < sizes[kc])
    fi[inside] = k[inside]
    for j in np.unique(fi[inside]).tolist():
        sel = np.flatnonzero(fi == j)
        f = files[j]
        a = commitlog_fields.as_bytes(store.mapped(f))
        part = commitlog_fields.field_table(len(sel))
        got = _scan_at(a, commitlog_fields.words_of(a), phys[sel] - f.start, f.start, part,
                       jit.CRC_TABLES)
        ok[sel] = got
        fields[:, sel] = part
        del a
    return fi, ok, fields
