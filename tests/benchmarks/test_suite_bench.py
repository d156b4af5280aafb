"""benchmarks/suite_bench.py's correctness subset for CI: a few models of PyTorch's CPU lists, shrunk (--tiny), each
built, compiled by lens and judged by PyTorch's harness rule in a process of its own. Not a timing test."""
import importlib.util
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import suite_bench  # noqa: E402

_HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def _args(**kw):
    import argparse
    return argparse.Namespace(**{"reps": 1, "threads": 2, "backends": ["eager", "lens"], "cpu_time": False,
                                 "tiny": True, "timeout": 600, **kw})


@pytest.mark.skipif(not _HAS_TRANSFORMERS, reason="transformers is not installed (pip install -e .[test])")
@pytest.mark.parametrize("name", ["BertForMaskedLM", "GPT2ForSequenceClassification", "T5Small"])
def test_huggingface_models_run_correctly_under_lens(name):
    result = suite_bench.run_isolated("hf", name, _args())
    assert result.status == "ok", result.error
    assert result.accurate == {"eager": True, "lens": True}
    assert result.lens_eager_graphs == 0  # every graph ran as generated code
    assert result.lens_split_ms["generated"] >= 0 and "lens" in result.median_ms


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed (a conv net suite run "
                    "needs timm and torchvision: docs/performance.md)")
@pytest.mark.parametrize("name", ["mobilenetv3_large_100", "poolformer_s12"])
def test_timm_conv_nets_run_correctly_under_lens(name):
    result = suite_bench.run_isolated("timm", name, _args())
    assert result.status == "ok", result.error
    assert result.accurate == {"eager": True, "lens": True} and result.lens_eager_graphs == 0


def test_the_accuracy_rule_fails_a_wrong_result():
    torch.manual_seed(0)
    fp64 = torch.randn(64, dtype=torch.float64)
    eager = fp64.float() + 1e-7 * torch.randn(64)
    assert suite_bench._accurate([eager], [fp64.float()], [fp64])
    assert not suite_bench._accurate([eager], [fp64.float() + 1e-2], [fp64])
    assert not suite_bench._accurate([eager], [fp64.float().flip(0)], [fp64])


def test_table_reports_the_geomean_of_accurate_models_only():
    ok = suite_bench.ModelResult("timm", "a", median_ms={"eager": 4.0, "inductor_freezing": 2.0, "lens": 1.0},
                                 accurate={"eager": True, "lens": True})
    wrong = suite_bench.ModelResult("timm", "b", median_ms={"eager": 4.0, "inductor_freezing": 2.0, "lens": 0.1},
                                    accurate={"eager": True, "lens": False})
    text = suite_bench.table([ok, wrong])
    assert "geomean lens / Inductor-with-freezing, timm: 0.50 over 1 models" in text
    assert "| timm | b |" in text and "False" in text
