"""A row's producer and the reduction that reads it back share one loop (compiler/codegen/strategies/sibling_loops.py);
results stay eager's."""
import re

import pytest
import torch

from compiler import config
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import assert_same, compile_with_debug, only_plan


def kernels(tmp_path, fn, *args) -> str:
    _, graph = compile_with_debug(tmp_path, fn, *args)
    return (graph / "output_code.py").read_text().split(PRELUDE_END, 1)[1]


def loop_bodies(code: str) -> list[str]:
    """The text of each `#pragma omp simd reduction` loop up to the next pragma."""
    return re.findall(r"#pragma omp simd reduction\(\+:\w+\)\n(.*?)(?=#pragma|\Z)", code, re.S)


def test_softmax_sums_its_exponentials_in_the_loop_that_computes_them(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "prefetch_rows", False)
    monkeypatch.setattr(config.cpp, "inline_exp", False)  # (else by blocks of lanes: test_exp_lanes.py)
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    (body,) = loop_bodies(code)
    assert "lens_exp(" in body and "buf1_local[x1_1] = " in body and re.search(r"buf2_local = buf2_local \+ ", body)
    (graph,) = tmp_path.glob("run_*/lens/graph_*")
    plan = only_plan(graph)  # planned: the sum (buf2) in the loop of the exps it reads (buf1), no loop of its own
    assert [(d.subject, d.choice) for d in plan.decisions if d.pass_name == "sibling loops"] == \
        [("buf1", "one loop with buf2")]
    assert "buf2" not in [d.subject for d in plan.decisions if d.pass_name == "vectorize"]


def test_the_fused_loop_by_lines_when_it_prefetches_the_next_row(tmp_path):
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    body = code[code.index("for (int64_t x1_1_base"):code.index("buf2_local = buf2_local + buf2_local_lanes[lane]")]
    assert "lens_exp_lanes<16>(" in body and "buf1_local[x1_1] = " in body and "__builtin_prefetch(" in body
    assert "buf2_local_lanes[x1_1_lane] = buf2_local_lanes[x1_1_lane] + " in body
    assert "for (int64_t r2_0" not in code


def test_a_reduction_reading_other_elements_keeps_its_own_loop(tmp_path):
    def fn(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.flip(-1).sum(-1, keepdim=True)  # the sum reads element 63 - j where e writes j
    x = torch.randn(64, 64)
    code = kernels(tmp_path, fn, x)
    assert not any("lens_exp(" in body for body in loop_bodies(code))
    assert_same(fn, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(8, 1024), (33, 100), (4, 5, 77)])
def test_fused_rows_equal_eager(dtype, shape):
    x = torch.randn(shape, dtype=dtype)
    x.view(-1)[3] = float("-inf")
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    assert_same(lambda x: torch.softmax(x, -1), x, **tol)
    assert_same(lambda x: torch.log_softmax(x, -1), x, **tol)
    assert_same(lambda x: (x * 2).exp() / (x * 2).exp().sum(-1, keepdim=True), x, **tol)
