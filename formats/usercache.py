"""Where mqtool keeps what it builds once per machine and user: ``$XDG_CACHE_HOME/mqtool``
(``~/.cache/mqtool`` when unset).

Used for what an installed package cannot keep beside its own files when they are not
writable: numba's compiled kernels (``numba/``, :mod:`.jit`) and the Spark reader's jar
(``spark/``, :mod:`mqtool.spark.session`).
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/mqtool/<parts>`` (``~/.cache/mqtool/<parts>`` when unset); not
    created here."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "mqtool", *parts)
