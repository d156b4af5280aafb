"""Time spent inside each backend's own graph compiler, on the aten graphs Dynamo and AOTAutograd hand it (lens:
`pipeline.compile_to_graph`: lowering, codegen, g++ or cache, load; Inductor: `_compile_fx_inner`), so that a first
call splits into Dynamo + AOTAutograd and the backend's share (compiler_bench.py, suite_bench.py)."""
from __future__ import annotations

import time
from collections.abc import Callable

BACKEND_MS: dict[str, float] = {"lens": 0.0, "inductor": 0.0}  # ms inside each graph compiler since the last reset
GRAPHS: dict[str, int] = {"lens": 0, "inductor": 0}  # graphs each graph compiler compiled since the last reset
_installed: list[bool] = []


def _timed(key: str, inner: Callable) -> Callable:
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            BACKEND_MS[key] += (time.perf_counter() - t0) * 1e3
            GRAPHS[key] += 1
    return timed


def install() -> None:
    """Wrap both graph compilers once (every path to lens's pipeline goes through compile_to_graph)."""
    if _installed:
        return
    _installed.append(True)
    from compiler import pipeline
    pipeline.compile_to_graph = _timed("lens", pipeline.compile_to_graph)
    try:
        from torch._inductor import compile_fx
        compile_fx._compile_fx_inner = _timed("inductor", compile_fx._compile_fx_inner)
    except (ImportError, AttributeError):  # another torch: Inductor's graph-compiler column stays empty
        BACKEND_MS.pop("inductor")


def reset() -> None:
    for key in BACKEND_MS:
        BACKEND_MS[key], GRAPHS[key] = 0.0, 0


def backend_key(backend: str) -> str | None:
    """The graph compiler a benchmark backend name runs ("inductor_freezing" is Inductor's)."""
    return "lens" if backend == "lens" else "inductor" if backend.startswith("inductor") else None
