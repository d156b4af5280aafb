"""A flat kernel's last loop cut at the constants its variable is compared with (codegen/range_splits.py):
concatenations along the innermost dimension and pads select per element with `x < c`; one loop per range lets g++
know each comparison (MixNet's concatenation kernel 2.9 -> 0.5 ms). Results equal eager's, the plan records the
ranges, and the printed C++ has exactly one loop per planned range."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from compiler import config
from tests.compiler.conftest import assert_same, compile_with_debug, kernel_plans, only_plan

CASES = {
    "cat two channels-last": (lambda a, b: torch.relu(torch.cat([a, b], 1) * 2 + 1),
                              lambda: [torch.randn(2, c, 5, 7).contiguous(memory_format=torch.channels_last)
                                       for c in (3, 5)], [3], 8),
    "cat three rows": (lambda a, b, c: torch.cat([a, b, c], -1).sigmoid(),
                       lambda: [torch.randn(6, n) for n in (4, 9, 2)], [4, 13], 15),
    "pad both sides": (lambda a: F.pad(a, (2, 3), value=-1.0) * 3, lambda: [torch.randn(5, 11)], [2, 13], 16),
    # a node's own loop (the kernel's nodes have loops of different lengths: the outer loop is over rows)
    "cat beside a narrower node": (lambda a, b: (torch.relu(torch.cat([a, b], 1)), (a * 2).sum(1)),
                                   lambda: [torch.randn(64, 40), torch.randn(64, 24)], [40], 64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_concatenations_and_pads_run_one_loop_per_range_and_match_eager(tmp_path, name):
    fn, inputs, cuts, size = CASES[name]
    args = inputs()
    out, graph = compile_with_debug(tmp_path, fn, *args)
    torch.testing.assert_close(out, fn(*args))
    plan = next(p for p in kernel_plans(graph).kernels if any(d.pass_name == "range splits" for d in p.decisions))
    (choice,) = [d.choice for d in plan.decisions if d.pass_name == "range splits"]
    bounds = [0, *cuts, size]
    ranges = list(zip(bounds, bounds[1:]))
    assert choice.endswith("as loops over " + ", ".join(f"[{a}, {b})" for a, b in ranges))
    code = (graph / "output_code.py").read_text()
    printed = re.findall(r"for \(int64_t (x[\d_]+) = (\d+); \1 < (\d+); \1\+\+\)", code)
    split = [v for v, a, b in printed if int(a) > 0]  # the variable of the loops starting past 0
    assert split and [(int(a), int(b)) for v, a, b in printed if v == split[0]] == ranges


def test_the_setting_off_keeps_one_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "range_splits", False)
    fn, inputs, _, _ = CASES["cat three rows"]
    args = inputs()
    out, graph = compile_with_debug(tmp_path, fn, *args)
    torch.testing.assert_close(out, fn(*args))
    assert not [d for d in only_plan(graph).decisions if d.pass_name == "range splits"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_uneven_concatenations_of_other_dtypes_match_eager(dtype):
    a = torch.arange(3 * 17, dtype=torch.float32).reshape(3, 17).to(dtype)
    b = (torch.arange(3 * 30, dtype=torch.float32).reshape(3, 30) * -1).to(dtype)
    assert_same(lambda x, y: torch.cat([y[:, :13], x, y], 1) + 1, a, b)


def test_each_range_reads_its_part_without_clamps(tmp_path):
    """In each range of a concatenation's split loop the part it reads is in bounds: no `lens_min`/`lens_max` clamp is
    printed there (an affine load g++ vectorizes; a clamp in the index kept it scalar)."""
    fn, inputs, _, _ = CASES["cat two channels-last"]
    args = inputs()
    out, graph = compile_with_debug(tmp_path, fn, *args)
    torch.testing.assert_close(out, fn(*args))
    code = (graph / "output_code.py").read_text()
    loads = re.findall(r"in_ptr\d\[([^\]]*)\]", code)
    assert loads and not [i for i in loads if "lens_min" in i or "lens_max" in i], loads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64], ids=str)
def test_a_channels_last_pad_selects_by_bits_and_matches_eager(tmp_path, dtype):
    """A channels-last pad's row/column test does not change in its channel loop: printed as `lens_select_bits`
    (a `?:` on that scalar bool kept the loop scalar), exact for every value (NaN, infinities, -0.0)."""
    x = torch.randn(1, 16, 5, 6).to(dtype) * 3
    if dtype.is_floating_point:
        x[0, 0, 0, 0], x[0, 1, 2, 3], x[0, 2, 4, 5] = float("nan"), float("-inf"), -0.0
    x = x.contiguous(memory_format=torch.channels_last)
    fn = lambda a: F.pad(a, (1, 2, 2, 1), value=-7) + 1  # noqa: E731
    out, graph = compile_with_debug(tmp_path, fn, x)
    expected = fn(x)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, equal_nan=True, rtol=0, atol=0)
    if dtype.is_floating_point:
        assert torch.equal(torch.signbit(out), torch.signbit(expected))
    assert f"lens_select_bits<{CTYPE[dtype]}>" in (graph / "output_code.py").read_text()


CTYPE = {torch.float32: "float", torch.float64: "double", torch.int32: "int32_t", torch.int64: "int64_t"}


@pytest.mark.parametrize("name,c", [("lt", 5), ("ge", 5), ("le", 4), ("gt", 4), ("lt", 0), ("ge", 9)])
def test_a_range_decides_the_comparisons_it_lies_on_one_side_of(name, c):
    """range_splits.decided: a comparison of the split variable with a constant becomes its answer wherever the range
    [start, end) gives it one answer, and stays where the range straddles its change."""
    import sympy

    from compiler.codegen.range_splits import decided
    from compiler.ir.nodes import Constant, IndexValue, Op
    x = sympy.Symbol("x0_1", integer=True, nonnegative=True)
    cmp = Op(torch.bool, "n", name, (IndexValue(torch.int64, "n", x), Constant(torch.int64, "n", c)))
    truth = {"lt": lambda v: v < c, "ge": lambda v: v >= c, "le": lambda v: v <= c, "gt": lambda v: v > c}[name]
    for start in range(0, 10):
        for end in range(start + 1, 11):
            got = decided(cmp, x, start, end)
            answers = {truth(v) for v in range(start, end)}
            if len(answers) == 1:
                assert isinstance(got, Constant) and got.value == answers.pop(), (start, end)
            else:
                assert got is not cmp and isinstance(got, Op) and got.name == name, (start, end)


def test_a_contiguous_pad_of_an_activation_selects_by_bits_in_each_range(tmp_path):
    """A pad after SiLU on a contiguous (N, C, H, W) tensor (TF-EfficientNet's training "same" pads): in the column
    loop's ranges the column tests are answered, the row test is all the select's condition, printed as bits (it kept
    the loop scalar: 4.0 ms against eager's 0.5)."""
    x = torch.randn(1, 4, 9, 10)
    fn = lambda a: F.pad(F.silu(a), (0, 1, 0, 1)) * 2  # noqa: E731
    out, graph = compile_with_debug(tmp_path, fn, x)
    torch.testing.assert_close(out, fn(x))
    assert "lens_select_bits<float>(" in (graph / "output_code.py").read_text()
