"""benchmarks/suite_bench.py's correctness subset for CI: a few models of PyTorch's CPU lists shrunk (--tiny), and
plain torch.nn stand-ins of the conv nets' blocks, each built, compiled by lens, run in inference and a training step
and judged by PyTorch's harness rule in a process of its own (1 thread). Not a timing test."""
import contextlib
import importlib.util
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import suite_bench
import suite_modes
import suite_report

_HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def _args(**kw):
    import argparse
    return argparse.Namespace(**{"reps": 1, "threads": 1, "backends": ["eager", "lens"], "cpu_time": False,
                                 "tiny": True, "timeout": 600, "mode": "infer", "optimizer": "sgd", "warm": True,
                                 **kw})


def _check_lens_ran_correctly(result, mode: str) -> None:
    assert result.status == "ok", result.error
    assert result.mode == mode and result.accurate == {"eager": True, "lens": True}
    assert result.lens_eager_graphs == 0  # every graph ran as generated code
    assert set(result.median_ms) == {"eager", "lens"} and "lens" in result.split_ms


@pytest.mark.skipif(not _HAS_TRANSFORMERS, reason="transformers is not installed (pip install -e .[test])")
@pytest.mark.parametrize(("name", "mode"), [("BertForMaskedLM", "infer"), ("GPT2ForSequenceClassification", "train")])
def test_huggingface_models_run_correctly_under_lens(name, mode):
    _check_lens_ran_correctly(suite_bench.run_isolated("hf", name, _args(mode=mode)), mode)


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_conv_net_blocks_run_correctly_under_lens(mode):
    """The conv nets' block types (depthwise conv, squeeze-excitation, hardswish, residual) where timm is absent."""
    _check_lens_ran_correctly(suite_bench.run_isolated("blocks", "mobilenet_blocks", _args(mode=mode)), mode)


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed (a conv net suite run "
                    "needs timm and torchvision: docs/performance.md)")
@pytest.mark.parametrize("name", ["mobilenetv3_large_100", "poolformer_s12"])
def test_timm_conv_nets_run_correctly_under_lens(name):
    _check_lens_ran_correctly(suite_bench.run_isolated("timm", name, _args()), "infer")


def _wrong_backward(gm, example_inputs):
    """aot_eager with every gradient of the backward graph scaled by 1.5: a training step the check must reject."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def backward(bw_gm, _):
        def run(*args):
            return [g * 1.5 if isinstance(g, torch.Tensor) else g for g in bw_gm(*args)]
        return make_boxed_func(run)
    return aot_autograd(fw_compiler=lambda fw_gm, _: make_boxed_func(fw_gm.forward), bw_compiler=backward)(
        gm, example_inputs)


def test_the_training_check_rejects_a_wrong_backward(monkeypatch):
    import backend_compile_time
    monkeypatch.setattr(backend_compile_time, "install", lambda: None)  # (lens's pipeline stays unwrapped here)
    monkeypatch.setattr(torch._dynamo.config, "cache_size_limit", torch._dynamo.config.cache_size_limit)
    torch._dynamo.register_backend(_wrong_backward, name="suite_test_wrong_backward")
    result = suite_bench.run_one("blocks", "mobilenet_blocks", "train", ["eager", "suite_test_wrong_backward"], 1,
                                 cpu_time=True, tiny=True)
    assert result.status == "ok", result.error
    assert result.accurate == {"eager": True, "suite_test_wrong_backward": False}


def test_the_accuracy_rule_fails_a_wrong_result():
    torch.manual_seed(0)
    fp64 = torch.randn(64, dtype=torch.float64)
    eager = fp64.float() + 1e-7 * torch.randn(64)
    assert suite_modes.accurate([eager], [fp64.float()], [fp64], 1e-4)
    assert not suite_modes.accurate([eager], [fp64.float() + 1e-2], [fp64], 1e-4)
    assert not suite_modes.accurate([eager], [fp64.float().flip(0)], [fp64], 1e-4)


def test_table_reports_the_geomean_of_accurate_models_only():
    ok = suite_bench.ModelResult("timm", "a", median_ms={"eager": 4.0, "inductor_freezing": 2.0, "lens": 1.0},
                                 accurate={"eager": True, "lens": True}, first_call_s={"lens": 3.0,
                                 "inductor_freezing": 30.0}, backend_compile_s={"lens": 1.0, "inductor_freezing": 10.0},
                                 split_ms={"lens": {"gemm_conv": 0.75, "other_aten": 0.1, "generated": 0.15}},
                                 lens_native_share=0.8)
    wrong = suite_bench.ModelResult("timm", "b", median_ms={"eager": 4.0, "inductor_freezing": 2.0, "lens": 0.1},
                                    accurate={"eager": True, "lens": False})
    text = suite_report.table([ok, wrong], suite_modes.MODES["bf16"])
    assert "geomean lens / Ind.+fr. (bf16), timm: 0.50 over 1 models" in text.splitlines()
    assert "| timm | a | 4.00 | 2.00 | 1.00 | 0.50 | 0.25 | yes | 3.0 / 30.0 | 1.0 / 10.0 (0.10) | 75% / 10% / 15% | - | " \
           "80% | ok |" in text.splitlines()
    assert "| timm | b | 4.00 | 2.00 | 0.10 | 0.05 | 0.03 | NO | - | - | - | - | - | ok |" in text.splitlines()
    assert "geomean graph compiler lens / Ind.+fr.: 0.10 over 1 models" in text.splitlines()


def _aten_ops_of_a_call(fn, x) -> set[str]:
    with torch.no_grad(), torch.profiler.profile() as prof:
        fn(x)
    return {e.name for e in prof.events()}


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")
def test_inductor_with_freezing_is_frozen_as_users_set_it():
    """The anchor is Inductor as CPU users run it: `torch._inductor.config.freezing = True`. A compile option alone
    froze nothing (parameters stayed graph inputs, the convolution ATen's unpacked one); under the harness's flag
    Inductor packs the weight and calls oneDNN's convolution, and lens compiled beside it freezes as well."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16)
    mode = suite_modes.MODES["infer"]
    torch._dynamo.reset()
    try:
        with suite_modes.freezing_flag(mode, ["eager", "inductor_freezing", "lens"]):
            frozen = suite_modes.compiled("inductor_freezing", model)
            lens = suite_modes.compiled("lens", model)
            with torch.no_grad():
                torch.testing.assert_close(frozen(x), model(x), atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(lens(x), model(x), atol=1e-5, rtol=1e-4)
            assert "mkldnn::_convolution_pointwise" in _aten_ops_of_a_call(frozen, x)
            assert "lens::conv2d_onednn" in _aten_ops_of_a_call(lens, x)  # (lens's frozen convolution)
        import torch._inductor.config as inductor_config
        assert not inductor_config.freezing  # (the flag is the model's process's, not left set)
        assert isinstance(suite_modes.freezing_flag(suite_modes.MODES["train"], ["eager", "inductor", "lens"]),
                          contextlib.nullcontext)
    finally:
        torch._dynamo.reset()
