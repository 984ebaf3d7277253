"""The last few results of a pure function of arrays, found again for arguments equal bit for bit.

A release's evaluation reads the same leaves in several places (the curves, the AP's hull, its
reach and order spread, the ECE's estimate and its discretisation range), each taking the same
fit or slope of them afresh. `BitMemo` keeps a function's last few results and returns a copy
of one where every array argument equals the stored one bit for bit (shape, dtype and every
bit: -0.0 is not 0.0, a NaN matches its own bits) and every other argument is the stored
object itself: the same arguments, so the same result, without any assumption on who calls.
Only arguments of at most `max_entries` entries are kept (a few MB in all).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

_MISS = object()

_Key = tuple[bool, Any, Any, Any]
"""One argument's key: (True, dtype, shape, bits) for an array, (False, the object, …) else."""


def _bits(a: np.ndarray) -> np.ndarray:
    """`a`'s bits as integers of its item size (a contiguous copy where `a` is not one)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.itemsize in (1, 2, 4, 8) else a


class BitMemo:
    """The `size` most recent (arguments, result) pairs of one function (module docstring)."""

    def __init__(self, size: int, max_entries: int) -> None:
        self.size = size
        self.max_entries = max_entries
        self._entries: list[tuple[list[_Key], Any]] = []
        self._lock = threading.Lock()

    def _key(self, args: tuple[Any, ...]) -> list[_Key] | None:
        """Per argument: (True, dtype, shape, bits) for an array, (False, the object) else."""
        key: list[_Key] = []
        for a in args:
            if isinstance(a, np.ndarray):
                if a.size > self.max_entries:
                    return None
                key.append((True, a.dtype.str, a.shape, _bits(a)))
            else:
                key.append((False, a, None, None))
        return key

    @staticmethod
    def _same(key: list[_Key], stored: list[_Key]) -> bool:
        if len(key) != len(stored):
            return False
        for (array, k1, k2, k3), (s0, s1, s2, s3) in zip(key, stored, strict=True):
            if array != s0:
                return False
            if not array:
                if k1 is not s1:
                    return False
            elif k1 != s1 or k2 != s2 or not np.array_equal(k3, s3):
                return False
        return True

    def get(self, *args: Any) -> Any:
        """A copy of the stored result for these arguments, or `MISS`."""
        key = self._key(args)
        if key is None:
            return _MISS
        with self._lock:
            for stored, result in self._entries:
                if self._same(key, stored):
                    return _copy(result)
        return _MISS

    def put(self, result: Any, *args: Any) -> None:
        """Keep `result` (a copy) for these arguments (copies of the arrays' bits)."""
        key = self._key(args)
        if key is None:
            return
        kept = [(k[0], k[1], k[2], k[3].copy() if k[0] else None) for k in key]
        with self._lock:
            self._entries.insert(0, (kept, _copy(result)))
            del self._entries[self.size :]


MISS = _MISS
"""What `BitMemo.get` returns where no stored result matches."""


def _copy(result: Any) -> Any:
    if isinstance(result, np.ndarray):
        return result.copy()
    if isinstance(result, tuple):
        return tuple(_copy(r) for r in result)
    return result
