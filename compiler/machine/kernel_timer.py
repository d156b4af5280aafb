"""Per-kernel timing of generated kernels: the runtime wraps each kernel of a profiled module in `profiled`,
the profiler switches `KernelTimer` on and reads its totals (its own module so that neither imports the other)."""
from __future__ import annotations

import time
from typing import Callable

import torch


class KernelTimer:
    """Wall time per kernel, measured around each call while `enabled` (no profiler running)."""

    enabled = False
    totals: dict[str, list[float]] = {}  # kernel name -> seconds of each call

    @classmethod
    def reset(cls) -> None:
        cls.totals = {}


def profiled(name: str, fn: Callable) -> Callable:
    record = torch.profiler.record_function
    clock = time.perf_counter

    def call(*ptrs):
        if KernelTimer.enabled:
            start = clock()
            fn(*ptrs)
            KernelTimer.totals.setdefault(name, []).append(clock() - start)
            return
        with record(name):
            fn(*ptrs)

    return call
