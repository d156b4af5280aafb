"""Frozen bfloat16-autocast Linear layers as `lens.linear_onednn` with the activation after them fused
(compiler/graph_passes/linear_onednn.py), against eager's autocast run: each activation, 2-d and 3-d inputs, an
activation with another reader, a Linear without bias, float32 and float16 graphs and CPUs without bfloat16 dot
products left alone, the setting, the call generated code makes and the why-record of it."""
from __future__ import annotations

import json
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from compiler import config
from compiler.graph_passes import freezing
from compiler.machine import gemm, gemm_half, gemm_packed, linear_packed
from tests.compiler.conftest import compile_with_debug

FOLD = "bf16 linear as oneDNN with its activation"
BF16 = torch.bfloat16
native = pytest.mark.skipif(
    not gemm._onednn_ok() or not gemm_half.packs_weights(BF16),
    reason="this CPU (or torch's oneDNN) has no bfloat16 dot products: its bfloat16 products are float32 ones "
           "(machine/gemm_half.py), which this pass leaves alone (test_a_cpu_without_them_keeps_the_products)")

# activation -> (its module code, the post-op oneDNN applies: attr, algorithm)
ACTIVATIONS = {
    "none": (lambda t: t, ("none", "")),
    "relu": (torch.relu, ("relu", "")),
    "gelu": (F.gelu, ("gelu", "none")),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), ("gelu", "tanh")),
    "silu": (F.silu, ("swish", "")),
    "sigmoid": (torch.sigmoid, ("sigmoid", "")),
    "tanh": (torch.tanh, ("tanh", "")),
    "hardswish": (F.hardswish, ("hardswish", "")),
    "relu6": (F.relu6, ("hardtanh", "")),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), ("leaky_relu", "")),
    "method_relu": (lambda t: t.relu(), ("relu", "")),
}


class Block(nn.Module):
    """A transformer MLP: Linear, activation, Linear, residual."""

    def __init__(self, act="gelu", width=64, hidden=256, bias=True):
        super().__init__()
        self.up, self.down = nn.Linear(width, hidden, bias=bias), nn.Linear(hidden, width, bias=bias)
        self.act = ACTIVATIONS[act][0]

    def forward(self, x):
        return self.down(self.act(self.up(x))) + x


def _run(model, x, exact=False):
    """lens's output under bfloat16 autocast and no_grad, compared with eager's there (bitwise where `exact`), twice;
    the post-ops of the lens.linear_onednn calls freezing made and how many Linears it replaced."""
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        expected = model(x)
        compiled = torch.compile(model, backend="lens")
        got, again = compiled(x), compiled(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, again)
    if exact:
        assert torch.equal(got, expected)
    else:  # (the activation reads the float32 accumulator, eager's the product rounded to bfloat16)
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
    frozen = freezing.FROZEN[before:]
    posts = [(n.args[3], n.args[5]) for f in frozen for n in f.gm.graph.nodes
             if n.target is linear_packed.LINEAR_ONEDNN]
    return posts, sum(f.folds.get(FOLD, 0) for f in frozen)


@native
@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_each_activation_is_fused_and_matches_eager(act):
    torch.manual_seed(0)
    posts, folds = _run(Block(act).eval(), torch.randn(2, 33, 64))
    assert folds == 2 and posts == [ACTIVATIONS[act][1], ("none", "")]


@native
@pytest.mark.parametrize("act", ["none", "relu"])
def test_without_an_activation_or_with_relu_the_result_is_eagers_bitwise(act):
    """The same oneDNN kernel as eager's bfloat16 addmm; ReLU commutes with the rounding to bfloat16."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.Identity() if act == "none" else nn.ReLU(),
                          nn.Linear(256, 32, bias=False)).eval()
    posts, folds = _run(model, torch.randn(50, 64), exact=True)
    assert folds == 2 and posts == [ACTIVATIONS[act][1], ("none", "")]


@native
def test_an_activation_with_another_reader_stays_a_kernel():
    class TwoReaders(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 64)

        def forward(self, x):
            y = self.lin(x)
            return F.gelu(y) + y

    torch.manual_seed(0)
    posts, folds = _run(TwoReaders().eval(), torch.randn(4, 10, 64))
    assert folds == 1 and posts == [("none", "")]


def test_float32_linears_are_left_alone():
    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(2, 9, 64)
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="lens")(x), model(x), atol=1e-5, rtol=1e-5)
    assert all(f.folds.get(FOLD, 0) == 0 for f in freezing.FROZEN[before:])


def test_a_cpu_without_them_keeps_the_products(monkeypatch):
    """Where oneDNN does not compute bfloat16 natively, lens computes the products in float32 (gemm_half.py)."""
    monkeypatch.setattr(gemm_half, "packs_weights", lambda dtype: False)
    monkeypatch.setattr(gemm, "_HALF_ROUTES", {})  # (gemm.py remembers the answer per settings: not past this test)
    torch.manual_seed(0)
    posts, folds = _run(Block().eval(), torch.randn(2, 9, 64))
    assert posts == [] and folds == 0


def test_float16_linears_stay_products_even_where_float16_would_be_native(monkeypatch):
    """The pass takes bfloat16 alone: fused float16 products were measured and tested on no CPU here."""
    monkeypatch.setattr(gemm_half, "packs_weights", lambda dtype: True)
    monkeypatch.setattr(gemm, "_HALF_ROUTES", {})  # (gemm.py remembers the answer per settings: not past this test)
    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(2, 9, 64)
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        torch.testing.assert_close(torch.compile(model, backend="lens")(x), model(x), atol=1e-2, rtol=1e-2)
    assert all(f.folds.get(FOLD, 0) == 0 for f in freezing.FROZEN[before:])


@native
def test_the_setting_off_keeps_the_products(monkeypatch):
    monkeypatch.setattr(config, "freezing_linear_onednn", False)
    torch.manual_seed(0)
    posts, folds = _run(Block().eval(), torch.randn(2, 9, 64))
    assert posts == [] and folds == 0


@native
def test_generated_code_calls_the_kernel_directly_and_says_why(tmp_path, monkeypatch):
    """output_code.py calls linear_packed.linear with the frozen weight (a pack made once, on the first call); the
    why-record names the call a matrix product; the activation has no kernel of its own."""
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", 1 << 62)
    torch.manual_seed(0)
    model, x = Block("gelu").eval(), torch.randn(2, 9, 64)
    before = gemm_packed.packed_count()
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        out, graph = compile_with_debug(tmp_path, model, x)
        torch.testing.assert_close(out, model(x), atol=2e-2, rtol=2e-2)
    code = (graph / "output_code.py").read_text()
    calls = [line.strip() for line in code.splitlines() if "linear_packed.linear(" in line]
    assert len(calls) == 2 and "'gelu', [], 'none')" in calls[0] and "'none', [], '')" in calls[1], calls
    assert "from compiler.machine import linear_packed" in code and not re.search(r"void cpp_fused\w*gelu", code)
    assert gemm_packed.packed_count() == before + 2
    why = json.loads((graph / "why.json").read_text())
    reasons = {r["reason"] for r in why["records"] if r["kind"] == "aten_call"}
    assert reasons == {"gemm"}
