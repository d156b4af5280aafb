"""benchmarks/conv_bench.py on two small shapes: a row per shape with the rule's verdict, every way's time, and
each result's error against float64 (Winograd's within a few times the direct convolution's); not timed."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch

from compiler.machine import onednn_symbols, winograd

pytestmark = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available() or onednn_symbols.include_dir() is None or not winograd.supported(),
    reason="torch without oneDNN, no oneDNN header (`pip install --no-deps onednn-devel`; the Makefile does), or no "
           "AVX-512 (winograd.supported)")

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "conv_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("conv_bench_under_test", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_a_row_per_shape_with_the_rules_verdict_and_both_errors(bench):
    rows = bench.run([(64, 16, 64), (32, 8, 32)], reps=1, every_size=True)
    assert [(r["shape"], r["taken"]) for r in rows] == [((64, 16, 64), True), ((32, 8, 32), False)]
    for r in rows:
        assert min(r["eager"], r["direct"], r["winograd"]) > 0 and r["ratio"] == r["winograd"] / r["direct"]
        assert 0 < r["rmse_direct"] < 1e-6 and r["rmse_winograd"] < 10 * r["rmse_direct"]
    assert bench.run([(32, 8, 32)], reps=1, every_size=False) == []  # (refused sizes only with --all-sizes)
