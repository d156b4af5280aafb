"""Reductions over a middle axis (compiler/codegen/strategies/column_reduction.py): `x.sum(1)` of (B, R, N) runs as a
column reduction in each of the B outer indices, blocks of contiguous outputs with the reduced axis walked outside
them; results stay eager's for odd sizes, size-1 dims, non-contiguous inputs and half types."""
import re

import pytest
import torch

from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import compile_with_debug, only_plan

MIDDLE = {
    "sum": lambda x: x.sum(1), "mean": lambda x: x.mean(1), "amax_nan": lambda x: x.amax(1),
    "var": lambda x: x.var(1), "std_biased_plus": lambda x: x.std(1, unbiased=False) + 1,
    "amin_relu": lambda x: x.amin(1).relu() * 2, "sum_keepdim_add": lambda x: x.sum(1, keepdim=True) + 1,
    "sum_and_amax": lambda x: (x.sum(1), (x * 2).amax(1)),
}


def _code(graph) -> str:
    return (graph / "output_code.py").read_text().split(PRELUDE_END, 1)[1]


def _check(tmp_path, fn, x, **tol):
    out, graph = compile_with_debug(tmp_path, fn, x)
    expected = fn(x.float()) if x.dtype in (torch.bfloat16, torch.float16) else fn(x)
    for got, want in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple)
                         else (expected,)):
        assert got.dtype == x.dtype
        torch.testing.assert_close(got.float(), want.float(), equal_nan=True, **tol)
    return graph


@pytest.mark.parametrize("shape", [(3, 37, 21), (4, 300, 70), (2, 7, 13, 17), (2, 5, 2100)], ids=str)
@pytest.mark.parametrize("name", sorted(MIDDLE))
def test_reductions_over_a_middle_axis_are_column_reductions_per_outer_index(name, shape, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(shape)
    x[0, shape[1] // 2, 3] = float("nan")
    graph = _check(tmp_path, MIDDLE[name], x, rtol=1e-5, atol=1e-4)
    plan = only_plan(graph)
    assert plan.strategy == "column"
    outputs = 1
    for s in shape[2:]:
        outputs *= s
    block = outputs if outputs * 4 <= 8192 else 256  # a whole row of outputs up to 8 KiB
    (blocks,) = [d.choice for d in plan.decisions if d.pass_name == "column blocks"]
    assert blocks.startswith(f"blocks of {block} outputs in each of {shape[0]} outer indices")
    code = _code(graph)
    assert f"for (int64_t x0 = 0; x0 < {shape[0]}; x0++)\n" in code
    # (the outputs' loop: x1, or x2 where a 4-D tensor's last two dims merged)
    assert re.search(rf"for \(int64_t (x\d)_base = 0; \1_base < {outputs}; \1_base \+= {block}\)\n", code)


def test_a_large_middle_axis_sum_gives_threads_an_outer_index_and_a_block(tmp_path):
    """The issue 49 variant (`x.mT.sum(-1)` of (16, 1024, 512), the same as `x.sum(1)`): the reduced axis in the
    outer loop of each block, never the inner one (a column read with a 2 KiB stride); a block is a whole row."""
    torch.manual_seed(0)
    x = torch.randn(16, 1024, 512)
    graph = _check(tmp_path, lambda t: t.mT.sum(-1), x, rtol=1e-4, atol=1e-3)
    assert [d.choice for d in only_plan(graph).decisions if d.pass_name == "column blocks"] == \
        ["blocks of 512 outputs in each of 16 outer indices, an outer index and block per thread"]
    code = _code(graph)
    head = ("#pragma omp parallel for collapse(2)\n    for (int64_t x0 = 0; x0 < 16; x0++)\n"
            "    for (int64_t x1_base = 0; x1_base < 512; x1_base += 512)\n")
    assert head in code
    loops = re.findall(r"for \(int64_t (\w+) = 0; \w+ < [^;]+;", code[code.index(head):])
    assert loops[:5] == ["x0", "x1_base", "lane", "r0_0", "x1_lane"]  # the reduced axis outside the lanes
    assert "in_ptr0[512*r0_0 + 524288*x0 + x1]" in code


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["sum", "mean", "amax_nan", "var"])
def test_half_types_reduce_a_middle_axis_in_float(name, dtype, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(3, 67, 45).to(dtype)
    graph = _check(tmp_path, MIDDLE[name], x, rtol=1e-2, atol=2e-2)
    assert only_plan(graph).strategy == "column"


@pytest.mark.parametrize("case", [
    ("size_1_batch", lambda: torch.randn(1, 9, 33), lambda x: x.sum(1)),
    ("size_1_reduced", lambda: torch.randn(5, 1, 7), lambda x: x.mean(1)),
    ("size_1_outputs", lambda: torch.randn(7, 300, 1), lambda x: x.sum(1)),
    ("transposed_input", lambda: torch.randn(40, 6, 24).transpose(0, 1), lambda x: x.sum(1)),
    ("channels_last_sum_h", lambda: torch.randn(2, 6, 9, 11).to(memory_format=torch.channels_last),
     lambda x: x.sum(2)),
    ("strided_outputs", lambda: torch.randn(4, 50, 60)[:, :, ::2], lambda x: x.amax(1)),
    ("offset_view", lambda: torch.randn(5, 31, 40)[1:, 1:, 3:], lambda x: x.sum(1)),
], ids=lambda c: c[0])
def test_middle_axis_reductions_of_odd_and_non_contiguous_inputs(case, tmp_path):
    torch.manual_seed(0)
    _, make, fn = case
    _check(tmp_path, fn, make(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float64])
def test_middle_axis_sums_of_integers_and_doubles_are_exact(dtype, tmp_path):
    x = torch.randint(-50, 50, (6, 257, 130)).to(dtype)
    out, graph = compile_with_debug(tmp_path, lambda t: t.sum(1), x)
    assert torch.equal(out, x.sum(1)) if dtype != torch.float64 else torch.allclose(out, x.sum(1))
    assert only_plan(graph).strategy == "column"
