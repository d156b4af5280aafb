"""Convolutions as oneDNN primitives called through torch's own oneDNN (compiler/machine/onednn_direct.py): bit for bit
ATen's `_convolution_pointwise` over every post-op, geometry and dtype (float32; bfloat16 where oneDNN computes it
natively) lens hands it, taken by conv_packed.py only for registered weights and tensors of the dtypes a primitive
was made for, rebuilt after an in-place change, and off with its setting."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from compiler import config
from compiler.machine import conv_packed, onednn_direct, onednn_symbols

pytestmark = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available() or onednn_symbols.include_dir() is None,
    reason="torch without oneDNN, or no oneDNN header (`pip install --no-deps onednn-devel`; the Makefile does)")

_POINTWISE = torch.ops.mkldnn._convolution_pointwise
_BF16 = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported()
                           or not onednn_direct.takes(torch.bfloat16),
                           reason="oneDNN does not compute bfloat16 natively here (gemm_half.half_is_native)")
DTYPES = [torch.float32, pytest.param(torch.bfloat16, marks=_BF16)]
# the biases ATen's op takes with each dtype's input (a bfloat16 convolution reads a float32 bias as it is)
BIASES = {torch.float32: (torch.float32, None), torch.bfloat16: (torch.bfloat16, torch.float32, None)}


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


def _case(geometry, bias: bool | torch.dtype, seed: int = 0, dtype: torch.dtype = torch.float32):
    """Input, weight (both of `dtype`) and bias (of `bias`'s dtype, `dtype` for True, none for False/None)."""
    size, cout, k, stride, padding, dilation, groups = geometry
    g = torch.Generator().manual_seed(seed)
    x = _cl(torch.randn(size, generator=g).to(dtype))
    weight = _cl(torch.randn(cout, size[1] // groups, k, k, generator=g).to(dtype))
    b = torch.randn(cout, generator=g).to(dtype if bias is True else bias) if bias else None
    return x, weight, b, [padding] * 2, [stride] * 2, [dilation] * 2, groups


def _out_size(x, weight, padding, stride, dilation):
    return [x.shape[0], weight.shape[0]] + [
        (x.shape[2 + d] + 2 * padding[d] - dilation[d] * (weight.shape[2 + d] - 1) - 1) // stride[d] + 1
        for d in range(2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("post", POST_OPS, ids=lambda p: f"{p[0]}{p[1]}{p[2]}")
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_each_post_op_and_geometry_is_atens_result_bit_for_bit(geometry, post, dtype):
    attr, scalars, algorithm = post
    for bias in BIASES[dtype]:
        x, weight, b, padding, stride, dilation, groups = _case(geometry, bias, dtype=dtype)
        conv = onednn_direct.Convolution.make(list(x.shape), weight, bias, padding, stride, dilation, groups, attr,
                                              scalars, algorithm, _out_size(x, weight, padding, stride, dilation))
        assert conv is not None and conv.fits(x, b)
        packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups,
                                                              list(x.shape))
        expected = _POINTWISE(x, packed, b, padding, stride, dilation, groups, attr, scalars, algorithm)
        got = conv.run(x, b)
        assert got.dtype == expected.dtype == dtype
        assert got.shape == expected.shape and got.stride() == expected.stride()
        assert torch.equal(got, expected), (geometry, post, bias, (got.float() - expected.float()).abs().max())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("post_attr", ["none", "relu"])
@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[1], GEOMETRIES[2], GEOMETRIES[6]], ids=str)
def test_a_fused_residual_sum_is_atens_binary_post_op_bit_for_bit(geometry, post_attr, dtype):
    for bias in (dtype, None):
        x, weight, b, padding, stride, dilation, groups = _case(geometry, bias, seed=1, dtype=dtype)
        out_size = _out_size(x, weight, padding, stride, dilation)
        other = _cl(torch.randn(out_size).to(dtype))
        kept = other.clone()
        conv = onednn_direct.Convolution.make(list(x.shape), weight, bias, padding, stride, dilation, groups, "none",
                                              [], "", out_size, add=True, post_attr=post_attr)
        if dtype != torch.float32 and groups > 1:
            # ATen sums a grouped convolution's rounded output separately (its `add_relu_` refuses bfloat16): the
            # fused sum would not be its result, so no primitive, and ATen's op runs
            assert conv is None
            continue
        packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups,
                                                              list(x.shape))
        expected = _POINTWISE.binary(x, other, packed, b, padding, stride, dilation, groups, "add", None,
                                     None if post_attr == "none" else post_attr, [], "")
        assert conv.fits(x, b, other) and torch.equal(conv.run(x, b, other), expected)
        assert torch.equal(other, kept)  # (the residual is read, never written)


def test_what_the_primitives_do_not_take_is_refused(monkeypatch):
    x, weight, _b, padding, stride, dilation, groups = _case(GEOMETRIES[1], True)
    out = _out_size(x, weight, padding, stride, dilation)

    def make(weight, bias=torch.float32, attr="relu", **kwargs):
        return onednn_direct.Convolution.make(list(x.shape), weight, bias, padding, stride, dilation, groups, attr,
                                              [], "", out, **kwargs)
    assert make(weight, attr="elu") is None  # (an activation it has no mapping for)
    assert make(weight.half(), torch.float16) is None  # (a dtype it does not compute in)
    assert make(weight, torch.bfloat16) is None  # (a bias of another half dtype than the weight's)
    if onednn_direct.takes(torch.bfloat16) and torch.ops.mkldnn._is_mkldnn_bf16_supported():
        assert make(weight.bfloat16(), torch.bfloat16) is not None
        # ATen's binary op refuses a float32 bias of a bfloat16 convolution: so does the fused sum
        assert make(weight.bfloat16(), torch.float32, attr="none", add=True) is None
    monkeypatch.setattr(config.cpp, "half_gemm", "float32")  # bfloat16 not native: left to ATen's op
    assert not onednn_direct.takes(torch.bfloat16) and make(weight.bfloat16(), torch.bfloat16) is None


@_BF16
def test_a_primitive_runs_only_on_the_dtypes_it_was_made_for():
    x, weight, b, padding, stride, dilation, groups = _case(GEOMETRIES[1], True, dtype=torch.bfloat16)
    conv = onednn_direct.Convolution.make(list(x.shape), weight, torch.bfloat16, padding, stride, dilation, groups,
                                          "relu", [], "", _out_size(x, weight, padding, stride, dilation))
    assert conv.fits(x, b)
    assert not conv.fits(x.float(), b) and not conv.fits(x, b.float()) and not conv.fits(x, None)
    assert not conv.fits(x, b, other=torch.empty(conv.out_size, dtype=torch.bfloat16))  # (made without a sum)
    strided = torch.empty(2 * b.numel(), dtype=b.dtype)[::2].copy_(b)
    assert not conv.fits(x, strided)  # (a bias it would not read as it is)


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


@_BF16
def test_conv_packed_keeps_a_bfloat16_primitive_per_bias_dtype_and_leaves_non_native_bfloat16_to_aten(monkeypatch):
    x, weight, b, padding, stride, dilation, groups = _case(GEOMETRIES[1], True, seed=3, dtype=torch.bfloat16)
    geometry = (padding, stride, dilation, groups, "swish", [], "")
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, list(x.shape))
    conv_packed.register([weight])
    for bias in (b, b.float(), None):  # (one primitive each, each run only with its own bias dtype)
        got = conv_packed.conv2d(x, weight, bias, *geometry)
        assert got.dtype == torch.bfloat16 and torch.equal(got, _POINTWISE(x, packed, bias, *geometry))
    assert [(type(p), p.bias_dtype) for p in _packs(weight)] == [
        (onednn_direct.Convolution, torch.bfloat16), (onednn_direct.Convolution, torch.float32),
        (onednn_direct.Convolution, None)]
    monkeypatch.setattr(config.cpp, "half_gemm", "float32")  # (bfloat16 not native: ATen's op over a reordered weight)
    other = _cl(weight.clone())
    conv_packed.register([other])
    assert torch.equal(conv_packed.conv2d(x, other, b, *geometry), _POINTWISE(x, packed, b, *geometry))
    assert [type(p) for p in _packs(other)] == [torch.Tensor]


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


def _block() -> _Block:
    torch.manual_seed(0)
    model = _Block().eval()
    for bn in (model.bn1, model.bn2, model.bn3):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return model


def _direct_off(monkeypatch):
    monkeypatch.setattr(config.cpp, "onednn_direct", False)
    monkeypatch.setattr(onednn_direct, "HELPER", onednn_direct.library())
    monkeypatch.setattr(conv_packed, "_RECENT", {})


def test_a_compiled_block_runs_its_convolutions_as_primitives_and_matches_eager(monkeypatch):
    model, x = _block(), torch.randn(2, 16, 15, 15)
    got, names = _compiled_run(model, x, profile=True)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=2e-5, rtol=1e-4)
    assert {"lens::conv2d_onednn", "lens::conv2d_onednn_add"} <= names
    assert "mkldnn::_convolution_pointwise" not in names  # (no call went through ATen's op)
    _direct_off(monkeypatch)
    off, names = _compiled_run(model, x, profile=True)
    assert "mkldnn::_convolution_pointwise" in names and "lens::conv2d_onednn" in names  # (ATen's op, in our name)
    assert torch.equal(off, got)  # the setting off: ATen's op, the same kernels, the same bits


@_BF16
def test_a_compiled_bfloat16_autocast_block_runs_its_convolutions_as_primitives_and_matches_eager(monkeypatch):
    model, x = _block(), torch.randn(2, 16, 15, 15)
    monkeypatch.setattr(conv_packed, "_RECENT", {})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, names = _compiled_run(model, x, profile=True)
        with torch.no_grad():
            expected = model(x)
    kept = [r.packed for r in conv_packed._RECENT.values()]
    assert [(type(p), p.dtype, p.bias_dtype) for p in kept] == [(onednn_direct.Convolution, torch.bfloat16,
                                                                torch.bfloat16)] * 3  # (biases: the folded norms)
    assert got.dtype == expected.dtype == torch.float32  # (the block's bfloat16 output plus its float32 input)
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=3e-2)
    assert "lens::conv2d_onednn" in names  # (the three convolutions; the sum is not fused: bfloat16 plus float32)
    assert "mkldnn::_convolution_pointwise" not in names  # (no call went through ATen's op)
    _direct_off(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        off, names = _compiled_run(model, x, profile=True)
    assert "mkldnn::_convolution_pointwise" in names and "lens::conv2d_onednn" in names
    assert torch.equal(off, got)  # the setting off: ATen's op over bfloat16, the same kernels, the same bits
