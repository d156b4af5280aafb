"""Benchmarking and profiling of compiled modules (`python output_code.py [-p]`)."""
from __future__ import annotations

import time
from typing import Callable


def benchmark_module(call: Callable, get_args: Callable, times: int = 10, repeat: int = 10) -> float:
    """Median ms per call of `call(get_args())` (inputs made outside the timed region)."""
    samples = []
    for _ in range(repeat):
        arg_sets = [get_args() for _ in range(times)]
        start = time.perf_counter()
        for a in arg_sets:
            call(a)
        samples.append((time.perf_counter() - start) * 1000 / times)
    samples.sort()
    return samples[len(samples) // 2]


def profile_module(call: Callable, get_args: Callable, path: str, kinds: dict[str, str]) -> None:
    raise NotImplementedError("profiling output_code.py -p is not built yet")
