"""Pointwise kernel outputs written over an input buffer that dies in that kernel (compiler/codegen/strategies/inplace.py):
where it applies (relu after a matmul), every case where it must not, and results equal to eager's."""
import re

import pytest
import torch

from compiler import config
from tests.compiler.conftest import compile_with_debug


def code_of(tmp_path, fn, *args, tol=None):
    with torch.no_grad():
        out, graph = compile_with_debug(tmp_path, fn, *args)
        expected = fn(*args)
    for o, e in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(o, e, **(tol or {}))
    return (graph / "output_code.py").read_text()


def written_over(code: str) -> list[tuple[str, str]]:
    """(output, input) pairs of `call()`'s `bufN = bufM` lines."""
    return re.findall(r"^    (buf\d+) = (buf\d+)$", code, re.M)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(64, 32, 48), (5, 7, 3), (256, 512, 1024)])
def test_relu_after_a_matmul_writes_over_the_matmul_output(tmp_path, dtype, shape):
    m, k, n = shape
    x, w, b = torch.randn(m, k, dtype=dtype), torch.randn(n, k, dtype=dtype), torch.randn(n, dtype=dtype)
    # (a product this deep may run in oneDNN, compiler/machine/gemm.py: float32 rounds differently than eager's MKL)
    tol = {"atol": 1e-3, "rtol": 1e-5} if k * m * n >= config.cpp.onednn_min_macs else None
    code = code_of(tmp_path, lambda x: torch.nn.functional.linear(x, w, b).relu() * 2 - 1, x, tol=tol)
    (pair,) = written_over(code)
    # (the bias comes in too: addmm's bias is added in this kernel, compiler/lowering/graph.py)
    (kernel,) = re.findall(r'extern "C" void (cpp_fused_\w+)\((?:float|double)\* __restrict__ in_out_ptr0'
                           r'(?:, const (?:float|double)\* __restrict__ in_ptr\d+)?\)', code)
    (call,) = [line for line in code.splitlines() if line.startswith(f"    {kernel}(")]
    assert call.startswith(f"    {kernel}({pair[1]}.data_ptr()") and call.count(pair[1]) == 1  # its pointer, once


def test_an_mlp_keeps_eager_results_with_its_hidden_activation_written_in_place(tmp_path):
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64), torch.nn.GELU())
    x = torch.randn(128, 64)
    code = code_of(tmp_path, mlp, x, tol={"atol": 1e-5, "rtol": 1e-5})
    assert len(written_over(code)) >= 1


def _with_h(then):
    """`then(h)` of one matmul result h (so the graph has a single buffer h)."""
    def fn(x, w):
        return then(x @ w)
    return fn


KEEP_SEPARATE = {
    "a graph input is never written": lambda x, w: x.relu() @ w,
    "an input read after the kernel": _with_h(lambda h: (h.relu() @ h).sum()),
    "a graph output": _with_h(lambda h: (h, h.relu())),
    # (h.t().relu() alone is written in h's own order, over h, and returned transposed: see test_attention.py)
    "read at another element": _with_h(lambda h: h.t().relu().contiguous()),
    "read by a second node of the kernel": _with_h(lambda h: (h.relu() * 2, h.sum(0))),
}


@pytest.mark.parametrize("name", sorted(KEEP_SEPARATE))
def test_cases_that_keep_a_separate_output(tmp_path, name):
    x, w = torch.randn(32, 32), torch.randn(32, 32)
    x_before = x.clone()
    code = code_of(tmp_path, KEEP_SEPARATE[name], x, w, tol={"atol": 1e-3, "rtol": 1e-5})
    torch.testing.assert_close(x, x_before)
    assert not written_over(code), name


def test_outputs_written_in_place_are_returned_correctly_and_not_reused_while_held(tmp_path):
    w = torch.randn(16, 16)
    fn = lambda x: (x @ w).relu()  # noqa: E731
    torch._dynamo.reset()
    f = torch.compile(fn, backend="lens", dynamic=False)
    with torch.no_grad():
        a = f(torch.ones(16, 16))
        a_copy = a.clone()
        b = f(torch.full((16, 16), 2.0))  # the pool must not hand out a's storage while `a` is alive
    torch.testing.assert_close(a, a_copy)
    torch.testing.assert_close(b, (torch.full((16, 16), 2.0) @ w).relu())


def test_turned_off(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "inplace_buffers", False)
    w = torch.randn(32, 32)
    code = code_of(tmp_path, lambda x: (x @ w).relu(), torch.randn(32, 32))
    assert not written_over(code) and "in_out_ptr" not in code
