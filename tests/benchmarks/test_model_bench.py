"""The model benchmark's own logic (benchmarks/model_bench.py, model_bench_report.py, model_zoo.py): stage
arithmetic, variant parsing and the verdicts on fabricated results; never timings."""
from __future__ import annotations

import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import model_bench  # noqa: E402
import model_zoo  # noqa: E402
from model_bench_report import Result, target_lines  # noqa: E402


def _line(lines: list[str], title: str) -> str:
    (line,) = [ln for ln in lines if ln.strip().startswith(title)]
    return line


def test_union_of_overlapping_builds_counts_each_second_once():
    assert model_bench.union_ms([(0.0, 1.0), (0.5, 2.0), (3.0, 3.5)]) == pytest.approx(2500.0)
    assert model_bench.union_ms([]) == 0.0


def test_variant_settings_are_python_literals_or_strings():
    name, pairs = model_bench.parse_variant("nofreeze:freezing=False,cpp.gemm_library=aten")
    assert name == "lens nofreeze" and pairs == {"freezing": False, "cpp.gemm_library": "aten"}


def test_verdicts_name_the_models_that_miss():
    fast = Result(times={"eager": [2.0, 2.0], "inductor": [1.5, 1.5], "lens": [1.0, 1.2]},
                  stages={"lens": {"total": 100.0}, "inductor": {"total": 1000.0}}, warm_ms={"lens": 5.0})
    slow = Result(times={"eager": [1.0, 1.0], "inductor": [1.0, 1.0], "lens": [1.1, 1.1]},
                  stages={"lens": {"total": 500.0}, "inductor": {"total": 1000.0}}, warm_ms={"lens": 100.0},
                  mismatches={"lens": "differs"})
    lines = target_lines([("fast", fast), ("slow", slow), ("gone", Result(skipped="torchvision not installed"))])
    assert "MISSED by slow 1.1 (1/2 models)" in _line(lines, "run time <= 0.9x Inductor's")
    assert "MISSED by slow 0.5 (1/2 models)" in _line(lines, "cold first call")
    assert "MISSED by slow 0.2 (1/2 models)" in _line(lines, "warm first call")
    assert "MISSED by slow" in _line(lines, "results equal eager's")
    assert "gone (torchvision not installed)" in lines[-1]


def test_zoo_skips_what_is_not_installed_and_builds_the_convnet():
    names = {m.name: m for m in model_zoo.zoo()}
    assert {"bert", "gpt2", "vit", "mobilebert", "convnet"} <= names.keys()
    assert all(m.needs in ("", "transformers", "torchvision") for m in names.values())
    module, fn, inputs = model_zoo._convnet(32)()
    with torch.no_grad():
        assert fn(*inputs()).shape == (2, 100)


def test_autocast_runs_the_model_in_the_dtype_and_judges_with_its_tolerance():
    fn = model_bench._autocast(lambda a, b: a @ b, torch.bfloat16)
    assert fn(torch.randn(4, 4), torch.randn(4, 4)).dtype == torch.bfloat16
    assert model_bench._autocast(len, None) is len
    m = model_zoo.ZooModel("m", model_zoo._convnet(32))
    x = torch.ones(8)
    assert model_bench._mismatch(m, x, x + 0.01) is not None  # the float32 tolerance, 1e-3
    assert model_bench._mismatch(m, x, x + 0.01, model_bench.AUTOCAST["bf16"][1]) is None
    ok = Result(times={"eager": [2.0], "inductor": [1.5], "lens": [1.0]})
    assert "results equal eager's (0.05)" in "\n".join(target_lines([("ok", ok)], 0.05))


def test_a_miss_that_dynamo_alone_misses_too_is_named_out_of_reach():
    """The cold and warm targets show torch.compile's own first call (backend='eager') beside lens's figure:
    a warm start costing what Dynamo's trace alone costs is no backend's to cut."""
    traced = Result(times={"eager": [2.0], "inductor": [1.5], "lens": [1.0]},
                    stages={"lens": {"total": 1000.0}, "inductor": {"total": 2500.0}}, warm_ms={"lens": 360.0},
                    dynamo_ms=350.0)
    lean = Result(times={"eager": [2.0], "inductor": [1.5], "lens": [1.0]},
                  stages={"lens": {"total": 1000.0}, "inductor": {"total": 2500.0}}, warm_ms={"lens": 300.0},
                  dynamo_ms=50.0)
    lines = target_lines([("traced", traced), ("lean", lean)])
    warm = lines.index(_line(lines, "warm first call"))
    assert "traced 0.36 (Dynamo alone 0.35); lean 0.3 (Dynamo alone 0.05)" in lines[warm]
    assert lines[warm + 1].strip() == "out of any backend's reach (Dynamo alone misses it too): traced"
    cold = _line(lines, "cold first call")
    assert "traced 0.4 (Dynamo alone 0.14)" in cold and "out of any" not in lines[lines.index(cold) + 1]
    untimed = Result(times={"lens": [1.0]}, stages={"lens": {"total": 10.0}}, warm_ms={"lens": 5.0})
    assert "Dynamo alone" not in _line(target_lines([("untimed", untimed)]), "warm first call")


def test_a_training_step_is_judged_against_its_own_target():
    """Issue 32: inference <= 0.9x Inductor's time, a training step <= 1.0x."""
    even = Result(times={"eager": [2.0], "inductor": [1.0], "lens": [0.95]})
    assert "MISSED by even 0.95" in _line(target_lines([("even", even)]), "run time <= 0.9x")
    assert "met (1/1 models)" in _line(target_lines([("even", even)], run_target=1.0), "run time <= 1x")
