"""Frozen Linear layers sharing an input as one product (compiler/graph_passes/freezing_concat.py): eager's results, merged only
where the layers match, kept apart where a later op cannot read a column slice, refolded when a weight changes."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from compiler import config
from compiler.graph_passes import freezing, freezing_concat

KEY = "linears sharing an input as one product"


class Attention(nn.Module):
    """Query, key and value projections of one input (bias on all three), heads split by views."""

    def __init__(self, width: int = 64, heads: int = 4):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width // 2)
        self.heads = heads

    def forward(self, x):
        b, t, w = x.shape
        q = self.q(x).view(b, t, self.heads, -1).transpose(1, 2)
        k = self.k(x).view(b, t, self.heads, -1).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, -1).transpose(1, 2)
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ v


class Flattening(nn.Module):
    """Two layers on one input whose outputs are flattened with `view` (a column slice cannot be)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(8, 16)

    def forward(self, x):
        return self.a(x).view(-1) * 2 + self.b(x).view(-1)


class MixedBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(32, 16), nn.Linear(32, 16, bias=False), nn.Linear(32, 8)

    def forward(self, x):
        return torch.cat([self.a(x), self.b(x), self.c(x)], -1).relu()


@pytest.fixture(autouse=True)
def small_weights_merged(monkeypatch):
    monkeypatch.setattr(freezing_concat, "MIN_WEIGHT", 0)  # (the test's layers are small; the size rule below)


def test_small_weights_stay_apart(monkeypatch):
    monkeypatch.setattr(freezing_concat, "MIN_WEIGHT", 64 * 64 + 1)
    torch.manual_seed(0)
    _, folds = _compile(Attention().eval(), torch.randn(2, 10, 64))
    assert KEY not in folds


def _compile(model: nn.Module, x: torch.Tensor) -> tuple[object, dict]:
    torch._dynamo.reset()
    first = len(freezing.FROZEN)
    compiled = torch.compile(model, backend="lens")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    folds = freezing.FROZEN[first].folds if len(freezing.FROZEN) > first else {}
    return compiled, folds


def test_query_key_value_become_one_product_with_eagers_results():
    torch.manual_seed(0)
    _, folds = _compile(Attention().eval(), torch.randn(2, 10, 64))
    assert folds.get(KEY) == 3


def test_only_layers_alike_in_bias_are_merged():
    torch.manual_seed(0)
    _, folds = _compile(MixedBias().eval(), torch.randn(5, 32))
    assert folds.get(KEY) == 2  # (a and c: b has no bias)


def test_outputs_a_later_op_cannot_read_as_slices_are_kept_apart():
    torch.manual_seed(0)
    _, folds = _compile(Flattening().eval(), torch.randn(4, 8))
    assert KEY not in folds


def test_a_changed_weight_is_concatenated_again():
    torch.manual_seed(0)
    model, x = Attention().eval(), torch.randn(2, 10, 64)
    compiled, folds = _compile(model, x)
    assert folds.get(KEY) == 3
    with torch.no_grad():
        model.k.weight.mul_(-3)
        model.v.bias.add_(1)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_setting_off_keeps_them_apart(monkeypatch):
    monkeypatch.setattr(config, "freezing_concat_linears", False)
    torch.manual_seed(0)
    _, folds = _compile(Attention().eval(), torch.randn(2, 10, 64))
    assert KEY not in folds


@pytest.mark.parametrize("rows", [1, 7])
def test_any_row_count(rows):
    torch.manual_seed(0)
    _, folds = _compile(Attention(width=32, heads=2).eval(), torch.randn(rows, 3, 32))
    assert folds.get(KEY) == 3
