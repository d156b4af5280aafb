"""The compiler benchmark's verdicts (benchmarks/compiler_bench.py `target_lines`), on fabricated results."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "compiler_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("compiler_bench_under_test", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _result(bench, times: dict[str, list[float]], compile_ms: dict[str, float], graphs: int = 1):
    return bench.Result(times=times, compile_ms=compile_ms, graphs={"lens": graphs})


def _workload(bench, name: str, memory_bound: bool = True):
    return bench.Workload(name, lambda x: x, lambda: [], None, "-", memory_bound=memory_bound)


def _line(lines: list[str], title: str) -> str:
    (line,) = [ln for ln in lines if ln.strip().startswith(title)]
    return line


def test_missed_targets_name_the_workload_and_torch_compile_floor(bench):
    fast = _result(bench, {"eager": [2.0, 2.0], "lens": [1.0, 1.0], "inductor": [1.5, 1.5], "dynamo": [2.1, 2.1],
                           "bound": [0.9, 0.9]},
                   {"lens cold": 100.0, "inductor cold": 1000.0, "lens warm": 20.0, "dynamo warm": 30.0})
    slow = _result(bench, {"eager": [1.0, 1.0], "lens": [1.03, 1.05], "inductor": [1.1, 1.1],
                           "dynamo": [1.08, 1.08], "bound": [0.5, 0.5]},
                   {"lens cold": 300.0, "inductor cold": 1000.0, "lens warm": 130.0, "dynamo warm": 168.0}, graphs=2)
    lines = bench.target_lines([(_workload(bench, "quick"), fast), (_workload(bench, "slow"), slow)])
    assert "met (2/2 workloads)" in _line(lines, "run time <= 1.0x Inductor's")
    eager = _line(lines, "faster than eager")
    assert "MISSED by slow 1.04 (no-op backend 1.08) (1/2 workloads)" in eager and "quick" not in eager
    assert "MISSED by slow 2.08 (1/2 workloads)" in _line(lines, "memory-bound <= 1.5x its bound")
    assert "MISSED by slow 0.3 (1/2 workloads)" in _line(lines, "cold first call <= 0.2x Inductor's")
    # per graph: 130 ms over 2 graphs is 65; the no-op backend's 168 ms, 84
    assert "MISSED by slow 65 (no-op backend 84) (1/2 workloads)" in _line(lines, "warm first call <= 50 ms")


def test_unmeasured_figures_are_not_judged(bench):
    r = _result(bench, {"eager": [1.0], "lens": [0.5]}, {})
    lines = bench.target_lines([(_workload(bench, "compute", memory_bound=False), r)])
    assert "met (1/1 workloads)" in _line(lines, "faster than eager")
    for title in ("run time <= 1.0x Inductor's", "memory-bound <= 1.5x its bound",
                  "cold first call <= 0.2x Inductor's", "warm first call <= 50 ms per graph"):
        assert "nan (0/0 workloads)" in _line(lines, title)
