"""A float exp in a lane loop, cut around an inline vector exp (compiler/codegen/strategies/exp_lanes.py): the same bits as
the call of the 16-lane variant, temps from before the cut computed again after it, and no call left."""
import subprocess

import pytest
import torch

from compiler import config
from compiler.machine import build
from tests.compiler.conftest import compile_with_debug

FAST = bool(build.isa_flags())


def _source(graph) -> str:
    return (graph / "output_code.py").read_text().split("cpp_source = r'''", 1)[1].split("'''", 1)[0]


def _both(tmp_path, monkeypatch, fn, *args):
    """fn's lens results with the cut and with the call, and the cut version's C++."""
    got, graph = compile_with_debug(tmp_path / "cut", fn, *args)
    monkeypatch.setattr(config.cpp, "inline_exp", False)
    torch._dynamo.reset()
    called, plain = compile_with_debug(tmp_path / "call", fn, *args)
    assert "lens_exp_lanes<" not in _source(plain)
    return got, called, _source(graph)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _masked_softmax(x, mask):
    return torch.softmax(x + mask, -1)


@pytest.mark.parametrize("cols", [16, 256, 1024, 1000])
def test_softmax_rows_give_the_bits_of_the_call(tmp_path, monkeypatch, cols):
    x = torch.randn(37, cols) * 30
    x[3, 5] = float("nan")
    x[4, :] = float("-inf")  # a row of NaN results
    x[5, 1] = float("inf")
    mask = torch.zeros(1, cols)
    mask[:, cols // 2:] = float("-inf")
    got, called, source = _both(tmp_path, monkeypatch, _masked_softmax, x, mask)
    if cols % 16 == 0:  # (rows with a tail sum in another order than the call's `simd reduction` loop)
        assert torch.equal(_bits(got), _bits(called))
    torch.testing.assert_close(got, torch.softmax(x + mask, -1), equal_nan=True)
    if cols > 16:  # (rows of 16 take another kernel)
        assert "lens_exp_lanes<16>(" in source


@pytest.mark.parametrize("fn", [
    lambda x: (x * torch.exp(x)).sum(-1),  # x's load is read again after the cut
    lambda x: (torch.exp(x) + torch.exp(x * 0.5) - x).sum(-1),  # two cuts in one loop
    lambda x: torch.exp(torch.exp(x * 0.1)).amax(-1),  # an exp of an exp
    lambda x: torch.logsumexp(x, -1),
], ids=["reuse", "two", "nested", "logsumexp"])
def test_temps_from_before_a_cut_are_computed_again_after_it(tmp_path, monkeypatch, fn):
    x = torch.randn(64, 512) * 3
    got, called, source = _both(tmp_path, monkeypatch, fn, x)
    assert "lens_exp_lanes<" in source
    assert torch.equal(_bits(got), _bits(called))
    torch.testing.assert_close(got, fn(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cols", [17, 33, 1000, 1001])
def test_rows_of_no_whole_lines_cut_their_blocks_and_the_tail(tmp_path, monkeypatch, cols):
    # the exp and the sum share a loop by blocks of 16 lanes; the tail is the first lanes of one more block
    x = torch.randn(300, cols) * 20  # (enough rows for threads: the pair shares a loop in parallel kernels)
    x[2, cols - 1] = float("nan")
    x[3, -3:] = float("inf")
    x[4, :] = float("-inf")
    got, called, source = _both(tmp_path, monkeypatch, lambda t: torch.softmax(t, -1), x)
    assert f"x1_1_lane < {cols % 16}; " in source and "= {};" in source
    torch.testing.assert_close(got, called, equal_nan=True, atol=1e-37, rtol=1.3e-6)  # the sum's order only
    torch.testing.assert_close(got, torch.softmax(x, -1), equal_nan=True)


@pytest.mark.skipif(not FAST, reason="the inline vector exp exists on AVX-512 machines with g++ only")
def test_the_cut_loop_calls_no_vector_function(tmp_path):
    _, graph = compile_with_debug(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(256, 1024))
    so = build.build_shared_library(_source(graph))  # a cache hit: the library the run above loaded
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True).stdout
    kernel = asm.split("_omp_fn.0>:", 1)[1].split("\n\n", 1)[0]
    assert "vrndscaleps" in kernel and "_ZGVeN16v_lens_expf" not in kernel, kernel
