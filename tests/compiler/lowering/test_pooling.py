"""2-d max and average pooling as generated code (compiler/lowering/pooling.py) vs eager, bit for bit, over the
geometries models use (strides, padding, dilation, ceil_mode, count_include_pad, divisor_override), both memory
formats, float dtypes; and what stays ATen's (indices read, large windows, integers)."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from tests.compiler.conftest import compile_with_debug

MAX_CASES = [  # (kernel, stride, padding, dilation, ceil_mode)
    (3, 2, 0, 1, False), (3, 2, 1, 1, False), (3, 1, 1, 1, False), (2, 2, 0, 1, True), (3, 2, 1, 1, True),
    ((3, 2), (2, 1), (1, 0), 1, False), (3, 1, 1, 2, False), (5, 3, 2, 1, True), (1, 1, 0, 1, False),
]
AVG_CASES = [  # (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    (3, 1, 1, False, True, None), (3, 1, 1, False, False, None), (3, 2, 1, True, True, None),
    (3, 2, 1, True, False, None), (2, 2, 0, False, True, None), ((3, 2), (2, 1), (1, 0), False, True, None),
    (5, 2, 2, True, False, None), (3, 1, 1, False, True, 4), (2, 2, 0, True, False, None),
]


def _input(shape, dtype, channels_last: bool, seed: int = 0) -> torch.Tensor:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return x.to(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x


def _extern_targets(graph) -> list[str]:
    """The ATen ops the graph left to extern calls (kernel_map.json's extern entries)."""
    text = (graph / "output_code.py").read_text()
    return [op for op in ("max_pool2d_with_indices", "avg_pool2d") if f"aten.{op}" in text]


def _same(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)  # (NaN where eager's is NaN)


@pytest.mark.parametrize("case", MAX_CASES, ids=str)
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "contig"])
def test_max_pool_is_generated_and_exact(case, channels_last, tmp_path):
    k, s, p, d, ceil = case
    x = _input((2, 19, 13, 11), torch.float32, channels_last)
    x[0, 3, 4, 5] = float("nan")  # NaN propagates through every window holding it
    x[1, 2] = float("-inf")  # a channel all -inf: the max is -inf

    def fn(t):
        return F.max_pool2d(t, k, s, p, d, ceil_mode=ceil) * 2

    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x)
        expected = fn(x)
    _same(got, expected)
    assert _extern_targets(graph) == []


@pytest.mark.parametrize("case", AVG_CASES, ids=str)
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "contig"])
def test_avg_pool_is_generated_and_exact(case, channels_last, tmp_path):
    k, s, p, ceil, include, divisor = case
    x = _input((2, 19, 13, 11), torch.float32, channels_last)

    def fn(t):
        return F.avg_pool2d(t.relu(), k, s, p, ceil_mode=ceil, count_include_pad=include, divisor_override=divisor)

    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x)
        expected = fn(x)
    _same(got, expected)
    assert _extern_targets(graph) == []


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_other_float_dtypes_and_3d_inputs(dtype, tmp_path):
    x = _input((8, 9, 10), dtype, False)  # (C, H, W): no batch

    def fn(t):
        return F.max_pool2d(t, 3, 2, 1), F.avg_pool2d(t, 3, 2, 1, count_include_pad=False)

    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x)
        expected = fn(x)
    for g, e in zip(got, expected):
        _same(g, e)
    assert _extern_targets(graph) == []


def test_inception_block_channels_last_after_convolutions(tmp_path):
    """A frozen conv net's pooling reads the convolution's channels-last output and feeds the next convolution."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2),
                                torch.nn.Conv2d(16, 24, 1), torch.nn.AvgPool2d(3, 1, 1), torch.nn.Conv2d(24, 8, 1)).eval()
    x = torch.randn(1, 3, 35, 35).to(memory_format=torch.channels_last)
    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, model, x)
        expected = model(x)
    torch.testing.assert_close(got, expected)
    assert _extern_targets(graph) == []


def test_what_stays_aten(tmp_path):
    """Indices read (a training graph's backward), a 7x7 window and integer inputs: ATen's calls, with the reason in
    why.json; results still eager's."""
    x = _input((2, 5, 16, 16), torch.float32, True)

    def fn(t, i):
        values, indices = F.max_pool2d(t, 2, 2, return_indices=True)
        return values, indices, F.avg_pool2d(t, 7, 1), F.max_pool2d(i, 3, 2)

    ints = torch.randint(-50, 50, (2, 5, 16, 16))
    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x, ints)
        expected = fn(x, ints)
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    assert _extern_targets(graph) == ["max_pool2d_with_indices", "avg_pool2d"]
    why = json.dumps(json.loads((graph / "why.json").read_text()))
    assert "indices are read" in why and "more than 25 taps" in why and "pooling of int64" in why


def test_training_max_pool_keeps_indices_from_aten():
    """In training the backward reads the indices: the forward stays ATen's and the gradients are eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.MaxPool2d(3, 2, 1), torch.nn.AvgPool2d(2))
    x = torch.randn(2, 3, 17, 17, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lens")
    compiled(x).sum().backward()
    got = x.grad.clone()
    x.grad = None
    model(x).sum().backward()
    torch.testing.assert_close(got, x.grad)
