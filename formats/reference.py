"""The construct reference layouts of the binary formats, built when first asked for.

Each format module describes its records twice: a ``struct`` (or numpy dtype) that its readers
and writers use, and a construct ``Struct`` with the Java field names, the reference layout that
tests and builders use. construct is slow to import and no read needs it, so a module defines
its layouts in a function and answers for them with :func:`layout` from its ``__getattr__``.
numpy is slow to import too: a module's dtypes are made on first use with :func:`dtype_once`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_BUILT: dict[str, dict[str, Any]] = {}


def layout(module: str, name: str, build: Callable[[], dict[str, Any]]) -> Any:
    """The layout ``name`` of ``module`` (its ``__name__``), from ``build`` on first use.

    Only upper-case names are layouts: what import machinery and tools ask a module for
    (``__path__``, ``__wrapped__``, ...) is answered without importing construct."""
    if not name.isupper() or name.startswith("_"):
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if module not in _BUILT:
        _BUILT[module] = build()
    try:
        return _BUILT[module][name]
    except KeyError:
        raise AttributeError(f"module {module!r} has no attribute {name!r}") from None


def dtype_once(namespace: dict[str, Any], name: str, fields: list[tuple[str, str]]) -> Any:
    """The numpy dtype ``name`` of a module (its ``globals()``), made from ``fields`` on first
    use and kept there, so that every reader shares the one dtype."""
    got = namespace.get(name)
    if got is None:
        import numpy as np

        got = namespace[name] = np.dtype(fields)
    return got
