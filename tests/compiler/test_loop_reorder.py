"""A pointwise node that reads a reduction kernel's per-channel results joins that kernel in a loop order led by the
channel (scheduler.py's `_loop_order_for`): BatchNorm's training forward and backward become one kernel each, as
Inductor's, with eager's results; values an earlier node stored once per outer iteration are read from a scalar
(cpp.py's mirrors), which keeps the inner loop vectorizable."""
import pathlib
import re

import pytest
import sympy
import torch

from compiler import config
from compiler.ir.nodes import ComputedBuffer, Layout, Load
from compiler.ir.nodes import loop_dims
from compiler.scheduler import FusedKernel, _loop_order_for

pytestmark = pytest.mark.timeout(300)


def _train_step_code(tmp_path, module, x, monkeypatch, reorder: bool):
    """Forward and backward of `module` on x under lens (debug files in tmp_path): (output, input grad, weight
    grad, {graph folder name: output_code.py text})."""
    monkeypatch.setattr(config, "loop_reorder", reorder)
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    torch._dynamo.reset()
    x = x.detach().requires_grad_()
    out = torch.compile(module, backend="lens")(x)
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape))
    graphs = sorted(pathlib.Path(tmp_path).glob("run_*/lens/graph_*"), key=lambda p: int(p.name.split("_")[1]))
    codes = {("forward", "backward")[i]: (p / "output_code.py").read_text() for i, p in enumerate(graphs)}
    return out, x.grad, module[0].weight.grad, codes


def _kernels(code: str) -> list[str]:
    call = code[code.index("def call(args):"):]
    return re.findall(r"^\s+(cpp_fused_\w+)\(", call, re.M)


def _eager(module, x):
    x = x.detach().requires_grad_()
    out = module(x)
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape))
    return out, x.grad, module[0].weight.grad


@pytest.mark.parametrize("shape,dtype", [((2, 8, 12, 12), torch.float32), ((3, 5, 7, 9), torch.float64),
                                         ((1, 16, 4, 33), torch.float32)])
def test_batch_norm_relu_training_is_one_kernel_each_way_and_matches_eager(tmp_path, monkeypatch, shape, dtype):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.BatchNorm2d(shape[1]), torch.nn.ReLU()).to(dtype)
    x = torch.randn(shape, dtype=dtype)
    out, gx, gw, codes = _train_step_code(tmp_path / "on", module, x, monkeypatch, reorder=True)
    module.zero_grad()
    e_out, e_gx, e_gw = _eager(module, x)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(out, e_out, **tol)
    torch.testing.assert_close(gx, e_gx, **tol)
    torch.testing.assert_close(gw, e_gw, **tol)
    forward, backward = _kernels(codes["forward"]), _kernels(codes["backward"])
    # forward: the statistics, normalization and ReLU in one kernel (then the step counter and running stats);
    # backward: ReLU's and BatchNorm's backward, reductions and input gradient, in one
    assert any("batch_norm" in k and "relu" in k for k in forward) and len(backward) == 1, (forward, backward)

    module.zero_grad()
    _, _, _, apart = _train_step_code(tmp_path / "off", module, x, monkeypatch, reorder=False)
    if shape[0] > 1:  # (a batch of one leads with the channel anyway)
        assert len(_kernels(apart["forward"])) > len(forward) and len(_kernels(apart["backward"])) > 1


def test_the_input_gradient_reads_the_statistics_from_scalars_not_through_output_pointers(tmp_path, monkeypatch):
    module = torch.nn.Sequential(torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    _, _, _, codes = _train_step_code(tmp_path, module, torch.randn(2, 8, 6, 6), monkeypatch, reorder=True)
    forward = codes["forward"]
    kernel = forward[forward.index('extern "C" void cpp_fused'):]
    simd_loops = kernel.split("#pragma omp simd\n")[1:]  # the pointwise loop's body: loads of inputs only
    assert simd_loops and any("_at)" in body.split("}")[0] or "_at;" in body.split("}")[0] for body in simd_loops)
    for body in simd_loops:
        assert not re.search(r"= out_ptr\d+\[x0\];", body.split("}")[0]), body


def test_channels_last_batch_norm_is_not_reordered_and_matches_eager(tmp_path, monkeypatch):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.BatchNorm2d(16), torch.nn.ReLU())
    x = torch.randn(2, 16, 5, 5).to(memory_format=torch.channels_last)
    out, gx, gw, _ = _train_step_code(tmp_path, module, x, monkeypatch, reorder=True)
    module.zero_grad()
    e_out, e_gx, e_gw = _eager(module, x)
    for got, want in ((out, e_out), (gx, e_gx), (gw, e_gw)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def _node(name, size, stride, body, reduction=None, ranges=()):
    xs = [sympy.Symbol(f"{name}_x{i}", integer=True) for i in range(len(size))]
    return ComputedBuffer(name, torch.float32, Layout(tuple(size), tuple(stride)), body(xs), xs, [name], name,
                          reduction_type=reduction, reduction_ranges=tuple(ranges))


def test_a_reorder_that_would_make_the_innermost_loop_strided_is_refused():
    # a column sum over dim 0 of an (N, C) tensor, then a pointwise over (N, C) reading it: led by C, the inner
    # loop would step by C elements
    red = _node("buf0", (8,), (1,), lambda xs: Load(torch.float32, None, "arg0", (sympy.Integer(0), xs[0])), "sum", (4,))
    k = FusedKernel([red], (8,), True)
    pw = _node("buf1", (4, 8), (8, 1), lambda xs: Load(torch.float32, None, "buf0", (xs[1],)))
    assert _loop_order_for(k, pw) is None
    # per-channel sums of (N, C, HW), then the pointwise over (N, C, HW): led by C, HW stays innermost
    red3 = _node("buf2", (8,), (1,), lambda xs: Load(torch.float32, None, "arg0", (sympy.Integer(0), xs[0], sympy.Integer(0))),
                 "sum", (4, 16))
    k3 = FusedKernel([red3], (8,), True)
    pw3 = _node("buf3", (4, 8, 16), (128, 16, 1), lambda xs: Load(torch.float32, None, "buf2", (xs[1],)))
    assert _loop_order_for(k3, pw3) == (1, 0, 2)
    pw3.loop_order = (1, 0, 2)
    assert loop_dims(pw3) == [1, 0, 2]


def test_batch_norm_forward_sums_each_channel_once_for_its_mean_and_its_saved_mean(tmp_path, monkeypatch):
    """The variance's mean (a local sum) and the mean saved for backward (a buffer) are one sum: the saved one is
    written from the local (ir/duplicates.py's drop_duplicates), then the squared deviations: two sums."""
    module = torch.nn.Sequential(torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    _, _, _, codes = _train_step_code(tmp_path, module, torch.randn(2, 8, 6, 6), monkeypatch, reorder=True)
    forward = codes["forward"]
    kernel = forward[forward.index('extern "C" void cpp_fused__native_batch_norm_legit_functional_relu'):]
    kernel = kernel[:kernel.index('\n}\n')]
    assert len(re.findall(r"reduction\(\+:", kernel)) == 2, kernel
