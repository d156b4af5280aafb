"""Keeps Dynamo out of Kernel Lens's own code and of the generated modules it imports.

A compiled function that calls `loss.backward()` or an optimizer runs its backward graph's lazy compile, and
every callback torch invokes, while Dynamo's frame hook is active: without this, Dynamo traced the compiler
itself (seconds per step, its recompile limit hit on `lowering/graph.py`) and, tracing lens's compile-end
callback while holding its own callback lock, hung forever. torch skips its own modules the same way.
"""
from __future__ import annotations

import os

_SKIPPED: set[str] = set()


def skip_dynamo_in(folder: str) -> None:
    """Dynamo never traces a frame whose file lies under `folder` (each folder registered once)."""
    folder = os.path.join(os.path.abspath(folder), "")
    if folder in _SKIPPED:
        return
    try:
        from torch._dynamo import trace_rules
    except ImportError:  # a torch without Dynamo traces nothing of ours
        return
    _SKIPPED.add(folder)
    trace_rules.SKIP_DIRS.append(folder)
    trace_rules._recompile_re()


def skip_compiler_package() -> None:
    skip_dynamo_in(os.path.dirname(os.path.abspath(__file__)))
