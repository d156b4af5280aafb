"""Row kernels prefetch the next row of the inputs they read as dense rows (compiler/codegen/strategies/prefetch.py),
after their first pass over the row; results stay eager's."""
import re

import pytest
import sympy
import torch

from compiler import config
from compiler.codegen.strategies.prefetch import _dense_row
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import assert_same, compile_with_debug, only_plan

PREFETCH = re.compile(r"__builtin_prefetch\((\w+) \+ (.*?) \+ pf, 0, 3\)")  # the whole row at once
LINE_PREFETCH = re.compile(r"__builtin_prefetch\((\w+) \+ (.*?) \+ (\w+_base), 0, 3\)")  # a line per block


def kernel_code(tmp_path, fn, *args) -> str:
    out, graph = compile_with_debug(tmp_path, fn, *args)
    expected = fn(*args)
    for o, e in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(o, e, rtol=1.3e-6, atol=1e-5)
    text = (graph / "output_code.py").read_text()
    return text.split(PRELUDE_END, 1)[1]  # the kernels


def test_softmax_asks_for_the_next_row_one_line_per_block_of_its_exp_pass(tmp_path):
    code = kernel_code(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    (graph,) = tmp_path.glob("run_*/lens/graph_*")
    plan = only_plan(graph)  # planned: a line per block of the exp pass (buf1, with the sum), not a burst
    assert plan.row_prefetch == "buf1"
    assert [(d.subject, d.choice) for d in plan.decisions if d.pass_name == "row prefetch"] == \
        [("buf1", "a line per block of its pass")]
    assert LINE_PREFETCH.findall(code) == [("in_ptr0", "1024*x0 + 1024", "x1_1_base")]
    assert "if (x0 + 1 < 64) { __builtin_prefetch(" in code and not PREFETCH.findall(code)  # no burst
    first_pass, prefetch, exp = code.index("max_propagate_nan"), code.index("__builtin_prefetch"), code.index("lens_exp_lanes<16>(")
    assert first_pass < prefetch < exp
    block = code[prefetch:code.index("buf2_local = buf2_local + buf2_local_lanes[lane]")]
    assert "buf2_local_lanes[x1_1_lane] = buf2_local_lanes[x1_1_lane] + " in block  # the sum, by lanes


def test_layer_norm_prefetches_its_input_rows_in_its_second_pass_but_not_the_weight(tmp_path):
    ln = torch.nn.LayerNorm(512)
    with torch.no_grad():
        ln.weight.normal_(), ln.bias.normal_()
    code = kernel_code(tmp_path, lambda x: ln(x).detach(), torch.randn(32, 512))
    assert LINE_PREFETCH.findall(code) == [("in_ptr0", "512*x0 + 512", "r1_0_base")]
    assert code.index("__builtin_prefetch") > code.index("buf0_local = buf0_local + ")  # after the first pass


def test_rows_that_do_not_split_into_lines_get_the_whole_next_row_after_the_first_pass(tmp_path):
    code = kernel_code(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(16, 1000))
    assert PREFETCH.findall(code) == [("in_ptr0", "1000*x0 + 1000")] and not LINE_PREFETCH.findall(code)
    assert code.index("max_propagate_nan") < code.index("__builtin_prefetch") < code.index("lens_exp_lanes<16>(")


@pytest.mark.parametrize("shape", [(64, 100), (1, 4096)])
def test_short_rows_and_single_rows_are_left_to_the_hardware(tmp_path, shape):
    code = kernel_code(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(shape))
    assert "__builtin_prefetch" not in code


def test_one_pass_reductions_stream_without_prefetch(tmp_path):
    # measured on the device: a prefetch slowed x.mean(-1) on (8192,1024) by ~8%, before or after the pass
    code = kernel_code(tmp_path, lambda x: x.mean(-1), torch.randn(64, 1024))
    assert "__builtin_prefetch" not in code


def test_rows_read_with_a_stride_are_not_prefetched(tmp_path):
    code = kernel_code(tmp_path, lambda x: torch.softmax(x[:, ::2], -1), torch.randn(64, 2048))
    assert "2048*x0" in code and "__builtin_prefetch" not in code


def test_dense_row_analysis():
    x0, x1, r0, r1 = sympy.symbols("x0 x1 r0 r1", integer=True, nonnegative=True)
    outer, ranges = {x0, x1}, {r0: 4, r1: 256}
    assert _dense_row(1024 * x1 + 256 * r0 + r1 + 7, x1, outer, ranges) == (1024 * x1 + 1031, 1024)
    assert _dense_row(4096 * x0 + 1024 * x1 + r1, x1, outer, ranges) == (4096 * x0 + 1024 * x1 + 1024, 256)
    assert _dense_row(1024 * x1 + 2 * r1, x1, outer, ranges) is None  # gaps
    assert _dense_row(256 * r0 + r1, x1, outer, ranges) is None  # the same block for every row
    assert _dense_row(1024 * x1 + r0 * r1, x1, outer, ranges) is None  # not affine


def test_turned_off(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "prefetch_rows", False)
    code = kernel_code(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(16, 1024))
    assert "__builtin_prefetch" not in code


@pytest.mark.parametrize("shape", [(3, 5, 700), (9, 2048), (2, 1024), (5, 3, 1024), (7, 1000)])
def test_prefetching_kernels_match_eager(shape):
    x = torch.randn(shape)
    x.view(-1)[5] = float("-inf")
    n = shape[-1]
    assert_same(lambda t: (torch.softmax(t, -1), torch.log_softmax(t * 2, -1), t.mean(-1), t.var(-1),
                           torch.nn.functional.layer_norm(t, (n,)), (t.exp() / t.exp().sum(-1, keepdim=True))), x,
                atol=1e-5, rtol=1e-5)
