"""Autocast's casts of frozen products' constant operands (compiler/graph_passes/freezing_autocast.py): Linear's, and GPT-2's
Conv1D `torch.addmm(bias, x, weight)`, mm and `@` (convolutions after a BatchNorm fold:
tests/compiler/graph_passes/test_freezing.py)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from compiler.frontend.dynamo_backend import lens_backend
from compiler.graph_passes import freezing


class _Conv1D(nn.Module):
    """GPT-2's projection: a (in, out) weight read by addmm with the bias as its first operand."""

    def __init__(self, nx: int, nf: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.05)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


class _Products(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = _Conv1D(32, 48)
        self.a = nn.Parameter(torch.randn(48, 40) * 0.05)
        self.b = nn.Parameter(torch.randn(40, 16) * 0.05)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.proj(x))
        return torch.mm(h.view(-1, 48), self.a).relu() @ self.b


def _frozen_under_autocast(model, x, dtype, check, change) -> None:
    """Two calls of `model` under autocast, compiled and eager (results close, in autocast's dtype), `check(frozen)`
    after each and `change()` (an in-place change of a parameter) between them: the graph is folded again once."""
    torch._dynamo.reset()

    def run(x):
        with torch.autocast("cpu", dtype=dtype):
            return model(x)
    first = len(freezing.FROZEN)
    compiled = torch.compile(run, backend=lens_backend)
    for _ in range(2):
        with torch.no_grad():
            got, expected = compiled(x), run(x)
        assert got.dtype == expected.dtype == dtype
        torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)
        (frozen,) = freezing.FROZEN[first:]
        check(frozen)
        with torch.no_grad():
            change()
    assert frozen.refolds == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_linear_weight_casts_are_constants_and_follow_a_changed_weight(dtype):
    """Under autocast, a Linear's float32 weight and bias are cast to autocast's dtype once, at the freeze, not on
    every call (the same values autocast casts to); an in-place change of the weight casts it again."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32)).eval()

    def check(frozen):
        assert frozen.folds["autocast weight casts"] == 4  # two weights, two biases
        assert all(c.dtype == dtype for c in frozen.constants if c.dim() == 2)
    _frozen_under_autocast(mlp, torch.randn(16, 64), dtype, check, lambda: mlp[0].weight.mul_(-1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_addmm_mm_and_matmul_operands_are_cast_once_and_follow_a_changed_weight(dtype):
    """Under autocast the constant float32 operands of addmm (its bias too), mm and `@` are cast to autocast's
    dtype at the freeze, not on every call; results equal eager's; an in-place change of a weight casts again."""
    torch.manual_seed(0)
    model = _Products().eval()

    def check(frozen):
        assert frozen.folds["autocast weight casts"] == 4  # addmm's weight and bias, mm's and matmul's weights
        assert sorted(tuple(c.shape) for c in frozen.constants if c.dtype == dtype) == [(32, 48), (40, 16), (48,),
                                                                                        (48, 40)]
    _frozen_under_autocast(model, torch.randn(2, 6, 32), dtype, check, lambda: model.proj.weight.mul_(-1))


def test_outside_autocast_nothing_is_cast():
    torch._dynamo.reset()
    model = _Products().eval()
    first = len(freezing.FROZEN)
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend=lens_backend)(x), model(x))
    assert all(f.folds.get("autocast weight casts", 0) == 0 for f in freezing.FROZEN[first:])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_an_ambient_autocast_region_casts_weights_once(dtype):
    """Compiled and called inside `torch.autocast` (the region is the caller's: Dynamo leaves no marker in the
    graph), the weights are cast once at the freeze all the same, and again after an in-place change."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Products().eval()
    x = torch.randn(2, 6, 32)
    first = len(freezing.FROZEN)
    compiled = torch.compile(model, backend=lens_backend)
    for step in range(2):
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
            got, expected = compiled(x), model(x)
        assert got.dtype == expected.dtype == dtype
        torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)
        (frozen,) = freezing.FROZEN[first:]
        assert frozen.folds["autocast weight casts"] == 4
        with torch.no_grad():
            model.proj.weight.mul_(-1)
    assert frozen.refolds == 1


def test_a_region_the_graph_turns_off_inside_an_ambient_one_casts_nothing_there():
    torch._dynamo.reset()
    torch.manual_seed(0)
    lin, other = nn.Linear(16, 16).eval(), nn.Linear(16, 16).eval()

    def f(x):
        with torch.autocast("cpu", enabled=False):
            y = other(x)  # (float32: autocast is off here)
        return lin(y)
    first = len(freezing.FROZEN)
    x = torch.randn(4, 16)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = torch.compile(f, backend=lens_backend)(x), f(x)
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)
    (frozen,) = freezing.FROZEN[first:]
    assert frozen.folds["autocast weight casts"] == 2  # lin's weight and bias; not other's
