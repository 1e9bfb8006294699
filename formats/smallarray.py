"""A few numpy operations over Python lists, for rules written once over arrays.

A check whose input may be large (an index file's slot table and entries) is written over
arrays with numpy's operators and the functions here (:func:`flatnonzero`,
:func:`count_nonzero`, :func:`zeros`, :func:`arange`, :func:`clip`, :func:`amax`), called
through a namespace ``xp``: ``numpy`` for a large input, this module for a small one, which
then costs no numpy import. :class:`Vec` is the list-backed array; it has what those rules use
of numpy's one-dimensional arrays (elementwise arithmetic and comparisons with a scalar or an
array of the same length, ``&``, ``|``, ``~`` on masks, indexing by an int, a slice, an index
array or a mask, assignment through a mask or an index array) and no more.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

int8 = int64 = int
"""Every integer is a Python int."""


class Vec:
    """A one-dimensional array of Python ints or bools."""

    __slots__ = ("v",)

    def __init__(self, values: Iterable[Any]) -> None:
        self.v: list[Any] = list(values)

    def __len__(self) -> int:
        return len(self.v)

    def tolist(self) -> list[Any]:
        return list(self.v)

    def astype(self, dtype: Any) -> Vec:
        return Vec(map(dtype, self.v))

    def _op(self, other: Any, op: Callable[[Any, Any], Any]) -> Vec:
        if isinstance(other, Vec):
            if len(other.v) != len(self.v):
                raise ValueError(f"shapes ({len(self.v)},) and ({len(other.v)},) differ")
            return Vec(map(op, self.v, other.v))
        return Vec([op(a, other) for a in self.v])

    def __add__(self, o: Any) -> Vec:
        return self._op(o, operator.add)

    def __sub__(self, o: Any) -> Vec:
        return self._op(o, operator.sub)

    def __mod__(self, o: Any) -> Vec:
        return self._op(o, operator.mod)  # Python's %: like numpy's, the divisor's sign

    def __lt__(self, o: Any) -> Vec:
        return self._op(o, operator.lt)

    def __le__(self, o: Any) -> Vec:
        return self._op(o, operator.le)

    def __gt__(self, o: Any) -> Vec:
        return self._op(o, operator.gt)

    def __ge__(self, o: Any) -> Vec:
        return self._op(o, operator.ge)

    def __eq__(self, o: object) -> Vec:  # type: ignore[override]
        return self._op(o, operator.eq)

    def __ne__(self, o: object) -> Vec:  # type: ignore[override]
        return self._op(o, operator.ne)

    __hash__ = None  # type: ignore[assignment]

    def __and__(self, o: Any) -> Vec:
        return self._op(o, lambda a, b: bool(a and b))

    def __or__(self, o: Any) -> Vec:
        return self._op(o, lambda a, b: bool(a or b))

    def __invert__(self) -> Vec:
        return Vec([not a for a in self.v])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return Vec(self.v[i])
        if isinstance(i, Vec):
            if i.v and isinstance(i.v[0], bool):
                if len(i.v) != len(self.v):
                    raise IndexError("mask length differs")
                return Vec([a for a, keep in zip(self.v, i.v, strict=True) if keep])
            return Vec([self.v[j] for j in i.v])
        return self.v[i]

    def __setitem__(self, i: Any, value: Any) -> None:
        if isinstance(i, Vec):
            if i.v and isinstance(i.v[0], bool):
                if len(i.v) != len(self.v):
                    raise IndexError("mask length differs")
                for j, keep in enumerate(i.v):
                    if keep:
                        self.v[j] = value
            else:
                for j in i.v:
                    self.v[j] = value
        else:
            self.v[i] = value


def flatnonzero(a: Vec) -> Vec:
    return Vec([j for j, x in enumerate(a.v) if x])


def count_nonzero(a: Vec) -> int:
    return sum(1 for x in a.v if x)


def zeros(n: int, dtype: Any = int) -> Vec:
    return Vec([dtype(0)] * n)


def arange(start: int, stop: int) -> Vec:
    return Vec(range(start, stop))


def clip(a: Vec, lo: int, hi: int) -> Vec:
    return Vec([min(max(x, lo), hi) for x in a.v])


def amax(a: Vec, initial: int) -> int:
    return int(max([initial, *a.v]))
