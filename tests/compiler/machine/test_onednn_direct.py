"""Convolutions as oneDNN primitives called through torch's own oneDNN (compiler/machine/onednn_direct.py): bit for bit
ATen's `_convolution_pointwise` over every post-op and geometry lens hands it, taken by conv_packed.py only for
registered float32 weights, rebuilt after an in-place change, and off with its setting."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from compiler import config
from compiler.machine import conv_packed, onednn_direct

pytestmark = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available() or onednn_direct.include_dir() is None,
    reason="torch without oneDNN, or no oneDNN header (`pip install --no-deps onednn-devel`; the Makefile does)")

_POINTWISE = torch.ops.mkldnn._convolution_pointwise


@pytest.fixture(scope="module", autouse=True)
def helper():
    assert onednn_direct.available(wait=True), "the helper did not build or load: see its build.log in the cache"


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


# (input size, out channels, kernel, stride, padding, dilation, groups)
GEOMETRIES = [
    ((1, 8, 4, 4), 8, 1, 1, 0, 1, 1),
    ((1, 16, 17, 13), 24, 3, 2, 1, 1, 1),
    ((2, 12, 9, 9), 12, 5, 1, 2, 1, 12),  # depthwise
    ((1, 32, 14, 14), 32, 3, 2, 1, 1, 32),  # depthwise, strided
    ((2, 16, 10, 11), 8, 3, 1, 2, 2, 4),  # grouped, dilated
    ((1, 3, 23, 23), 16, 3, 2, 1, 1, 1),  # a stem: three input channels
    ((1, 960, 1, 1), 240, 1, 1, 0, 1, 1),  # squeeze-excitation's one pixel
]
POST_OPS = [("none", [], ""), ("relu", [], ""), ("leaky_relu", [0.2], ""), ("sigmoid", [], ""), ("tanh", [], ""),
            ("swish", [], ""), ("hardswish", [], ""), ("hardsigmoid", [], ""), ("hardtanh", [0.0, 6.0], ""),
            ("hardtanh", [-0.5, 0.5], ""), ("gelu", [], "none"), ("gelu", [], "tanh")]


def _case(geometry, bias: bool, seed: int = 0):
    size, cout, k, stride, padding, dilation, groups = geometry
    g = torch.Generator().manual_seed(seed)
    x = _cl(torch.randn(size, generator=g))
    weight = _cl(torch.randn(cout, size[1] // groups, k, k, generator=g))
    b = torch.randn(cout, generator=g) if bias else None
    return x, weight, b, [padding] * 2, [stride] * 2, [dilation] * 2, groups


def _out_size(x, weight, padding, stride, dilation):
    return [x.shape[0], weight.shape[0]] + [
        (x.shape[2 + d] + 2 * padding[d] - dilation[d] * (weight.shape[2 + d] - 1) - 1) // stride[d] + 1
        for d in range(2)]


@pytest.mark.parametrize("post", POST_OPS, ids=lambda p: f"{p[0]}{p[1]}{p[2]}")
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_each_post_op_and_geometry_is_atens_result_bit_for_bit(geometry, post):
    attr, scalars, algorithm = post
    for bias in (True, False):
        x, weight, b, padding, stride, dilation, groups = _case(geometry, bias)
        conv = onednn_direct.Convolution.make(list(x.shape), weight, bias, padding, stride, dilation, groups, attr,
                                              scalars, algorithm, _out_size(x, weight, padding, stride, dilation))
        assert conv is not None
        packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups,
                                                              list(x.shape))
        expected = _POINTWISE(x, packed, b, padding, stride, dilation, groups, attr, scalars, algorithm)
        got = conv.run(x, b)
        assert got.shape == expected.shape and got.stride() == expected.stride()
        assert torch.equal(got, expected), (geometry, post, bias, (got - expected).abs().max())


@pytest.mark.parametrize("post_attr", ["none", "relu"])
@pytest.mark.parametrize("geometry", [GEOMETRIES[1], GEOMETRIES[2], GEOMETRIES[6]], ids=str)
def test_a_fused_residual_sum_is_atens_binary_post_op_bit_for_bit(geometry, post_attr):
    x, weight, b, padding, stride, dilation, groups = _case(geometry, True, seed=1)
    out_size = _out_size(x, weight, padding, stride, dilation)
    other = _cl(torch.randn(out_size))
    kept = other.clone()
    conv = onednn_direct.Convolution.make(list(x.shape), weight, True, padding, stride, dilation, groups, "none", [],
                                          "", out_size, add=True, post_attr=post_attr)
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, list(x.shape))
    expected = _POINTWISE.binary(x, other, packed, b, padding, stride, dilation, groups, "add", None,
                                 None if post_attr == "none" else post_attr, [], "")
    assert torch.equal(conv.run(x, b, other), expected)
    assert torch.equal(other, kept)  # (the residual is read, never written)


def test_what_the_primitives_do_not_take_is_refused():
    x, weight, b, padding, stride, dilation, groups = _case(GEOMETRIES[1], True)
    out = _out_size(x, weight, padding, stride, dilation)
    assert onednn_direct.Convolution.make(list(x.shape), weight, True, padding, stride, dilation, groups, "elu", [],
                                          "", out) is None  # (an activation it has no mapping for)
    assert onednn_direct.Convolution.make(list(x.shape), weight.bfloat16(), True, padding, stride, dilation, groups,
                                          "relu", [], "", out) is None


def test_conv_packed_runs_registered_weights_as_primitives_and_follows_in_place_changes():
    x, weight, b, padding, stride, dilation, groups = _case(GEOMETRIES[1], True, seed=2)
    geometry = (padding, stride, dilation, groups, "hardswish", [], "")
    loose = weight.clone()
    assert torch.equal(conv_packed.conv2d(x, loose, b, *geometry), F.hardswish(F.conv2d(x, loose, b, 2, 1))) or \
        torch.allclose(conv_packed.conv2d(x, loose, b, *geometry), F.hardswish(F.conv2d(x, loose, b, 2, 1)),
                       atol=2e-5, rtol=1e-4)
    assert not any(type(p) is onednn_direct.Convolution for p in _packs(loose))  # (not registered: no primitive)
    conv_packed.register([weight])
    first = conv_packed.conv2d(x, weight, b, *geometry)
    assert [type(p) for p in _packs(weight)] == [onednn_direct.Convolution]
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, list(x.shape))
    assert torch.equal(first, _POINTWISE(x, packed, b, *geometry))
    assert torch.equal(conv_packed.conv2d(x, weight, b, *geometry), first)  # (the kept primitive again)
    weight.mul_(-1)  # the version counter moves: a new primitive over the new values, never the stale copy
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, list(x.shape))
    assert torch.equal(conv_packed.conv2d(x, weight, b, *geometry), _POINTWISE(x, packed, b, *geometry))
    x2 = _cl(torch.randn(2, *x.shape[1:]))  # another input size: a primitive of its own
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, list(x2.shape))
    assert torch.equal(conv_packed.conv2d(x2, weight, b, *geometry), _POINTWISE(x2, packed, b, *geometry))


def _packs(weight):
    packs = conv_packed._PACKS.packs_of(weight)
    return list(packs.values()) if packs else []


class _Block(nn.Module):
    """A MobileNet-like residual block: 1x1 expand + ReLU, depthwise 3x3 + hardswish, 1x1 project + the input."""

    def __init__(self, c=16, e=48):
        super().__init__()
        self.expand, self.bn1 = nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e)
        self.dw, self.bn2 = nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), nn.BatchNorm2d(e)
        self.project, self.bn3 = nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.expand(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        return self.bn3(self.project(y)) + x


def _compiled_run(model, x, profile: bool = False):
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="lens")
        compiled(x)
        if not profile:
            return compiled(x), None
        with torch.profiler.profile() as prof:
            out = compiled(x)
    return out, {e.name for e in prof.events()}


def test_a_compiled_block_runs_its_convolutions_as_primitives_and_matches_eager(monkeypatch):
    torch.manual_seed(0)
    model = _Block().eval()
    for bn in (model.bn1, model.bn2, model.bn3):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 16, 15, 15)
    got, names = _compiled_run(model, x, profile=True)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=2e-5, rtol=1e-4)
    assert {"lens::conv2d_onednn", "lens::conv2d_onednn_add"} <= names
    assert "mkldnn::_convolution_pointwise" not in names  # (no call went through ATen's op)
    monkeypatch.setattr(config.cpp, "onednn_direct", False)
    monkeypatch.setattr(onednn_direct, "HELPER", onednn_direct._Helper())
    monkeypatch.setattr(conv_packed, "_RECENT", {})
    off, names = _compiled_run(model, x, profile=True)
    assert "mkldnn::_convolution_pointwise" in names and "lens::conv2d_onednn" in names  # (ATen's op, in our name)
    assert torch.equal(off, got)  # the setting off: ATen's op, the same kernels, the same bits
