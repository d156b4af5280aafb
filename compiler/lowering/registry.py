"""The table of lowerings: aten op overload -> function building a TensorValue from lowered arguments."""
from __future__ import annotations

from typing import Callable

LOWERINGS: dict[object, Callable] = {}


def register(*ops: object) -> Callable[[Callable], Callable]:
    """Register `fn` for each op; an OpOverloadPacket registers all of its overloads."""

    def deco(fn: Callable) -> Callable:
        for op in ops:
            if hasattr(op, "overloads"):
                for name in op.overloads():
                    LOWERINGS[getattr(op, name)] = fn
            else:
                LOWERINGS[op] = fn
        return fn

    return deco
