"""Training graphs' convolution_backward through compiler/machine/conv_train.py: depthwise weight gradients of kernels
larger than 3x3 computed by its loop (as close to a float64 reference as ATen's, the same layout, every output mask,
input and bias gradients ATen's own), everything else ATen's op untouched, and a compiled training step of a small
depthwise net taking the path and matching eager after three SGD steps."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from compiler import config
from compiler.machine import conv_packed, conv_train

_ATEN = torch.ops.aten.convolution_backward.default


@pytest.fixture(scope="module", autouse=True)
def helper():
    assert conv_train.available(wait=True), "the helper did not build or load: see its build.log in the cache"


# (input size, kernel (kh, kw), stride, padding, dilation, bias)
DEPTHWISE = [
    ((1, 72, 56, 56), (5, 5), 2, 2, 1, False),  # MobileNetV3's
    ((1, 120, 28, 28), (5, 5), 1, 2, 1, True),
    ((2, 24, 13, 11), (5, 5), 1, 2, 1, False),  # batch 2, odd sizes
    ((1, 20, 15, 15), (7, 7), 2, 3, 1, True),  # channels not a multiple of 16
    ((2, 33, 12, 12), (5, 3), 1, (2, 1), 2, False),  # dilated, one side of 3
    ((1, 16, 9, 9), (5, 5), 1, 0, 1, False),  # no padding
]
MASKS = [(True, True, True), (False, True, False), (True, True, False), (False, True, True)]


def _case(size, kernel, stride, padding, dilation, channels_last: bool = False, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    c = size[1]
    x = torch.randn(size, generator=g)
    w = torch.randn(c, 1, *kernel, generator=g)
    pad = list(padding) if isinstance(padding, tuple) else [padding] * 2
    geometry = ([stride] * 2, pad, [dilation] * 2, False, [0, 0], c)
    if channels_last:
        x, w = x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
    y = torch.ops.aten.convolution(x, w, None, *geometry)
    go = torch.randn(y.shape, generator=g)
    if channels_last:
        go = go.contiguous(memory_format=torch.channels_last)
    return go, x, w, geometry


@pytest.mark.parametrize("case", DEPTHWISE, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-d{c[4]}")
@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_depthwise_weight_gradient_is_as_accurate_as_atens_and_the_rest_is_atens(case, mask, channels_last):
    size, kernel, stride, padding, dilation, bias = case
    mask = [mask[0], mask[1], mask[2] and bias]
    go, x, w, geometry = _case(size, kernel, stride, padding, dilation, channels_last)
    bias_sizes = [size[1]] if bias else None
    before = conv_train.calls
    got = conv_train.convolution_backward(go, x, w, bias_sizes, *geometry, mask)
    assert conv_train.calls == before + 1, "the weight gradient was not this module's"
    want = _ATEN(go, x, w, bias_sizes, *geometry, mask)
    exact = _ATEN(go.double(), x.double(), w.double(), bias_sizes, *geometry, mask)[1]
    for i in (0, 2):  # ATen's own, bit for bit
        assert (got[i] is None) == (want[i] is None)
        if want[i] is not None:
            assert torch.equal(got[i], want[i]) and got[i].stride() == want[i].stride()
    assert got[1].shape == want[1].shape and got[1].stride() == want[1].stride() and got[1].dtype == torch.float32
    scale = exact.abs().max().item()
    ours, atens = (got[1].double() - exact).abs().max().item(), (want[1].double() - exact).abs().max().item()
    assert ours <= max(4 * atens, 1e-6 * scale), (ours, atens, scale)


# what stays ATen's: 3x3 and 1x1 kernels (oneDNN's jit kernels compute those), grouped with several channels a group,
# a channel multiplier, float64, transposed, no weight gradient asked for
REFUSED = [
    ((1, 32, 14, 14), (32, 1, 3, 3), 32, torch.float32, False, (True, True, False)),
    ((1, 32, 14, 14), (64, 32, 1, 1), 1, torch.float32, False, (True, True, False)),
    ((1, 32, 14, 14), (32, 4, 5, 5), 8, torch.float32, False, (True, True, False)),
    ((1, 16, 14, 14), (32, 1, 5, 5), 16, torch.float32, False, (True, True, False)),
    ((1, 16, 14, 14), (16, 1, 5, 5), 16, torch.float64, False, (True, True, False)),
    ((1, 16, 14, 14), (16, 1, 5, 5), 16, torch.float32, True, (True, True, False)),
    ((1, 16, 14, 14), (16, 1, 5, 5), 16, torch.float32, False, (True, False, True)),
]


@pytest.mark.parametrize("size, wsize, groups, dtype, transposed, mask", REFUSED)
def test_what_the_loop_does_not_take_is_atens_op_bit_for_bit(size, wsize, groups, dtype, transposed, mask):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(size, generator=g, dtype=dtype)
    w = torch.randn((wsize[1] * groups, wsize[0] // groups, *wsize[2:]) if transposed else wsize, generator=g,
                    dtype=dtype)
    pad = wsize[2] // 2
    geometry = ([1, 1], [pad, pad], [1, 1], transposed, [0, 0], groups)
    go = torch.randn(torch.ops.aten.convolution(x, w, None, *geometry).shape, generator=g, dtype=dtype)
    before = conv_train.calls
    got = conv_train.convolution_backward(go, x, w, None, *geometry, list(mask))
    assert conv_train.calls == before
    for a, b in zip(got, _ATEN(go, x, w, None, *geometry, list(mask))):
        assert (a is None and b is None) or torch.equal(a, b)


def test_off_by_its_setting(monkeypatch):
    monkeypatch.setattr(config.cpp, "depthwise_grad", False)
    monkeypatch.setattr(conv_train, "HELPER", conv_train.library())
    go, x, w, geometry = _case((1, 16, 9, 9), (5, 5), 1, 2, 1)
    before = conv_train.calls
    got = conv_train.convolution_backward(go, x, w, None, *geometry, [True, True, False])
    assert conv_train.calls == before and not conv_train.available()
    assert torch.equal(got[1], _ATEN(go, x, w, None, *geometry, [True, True, False])[1])


def test_the_profiler_sees_the_calls_as_lens_convolution_backward():
    go, x, w, geometry = _case((1, 16, 9, 9), (5, 5), 1, 2, 1)
    with torch.profiler.profile() as prof:
        conv_train.convolution_backward(go, x, w, None, *geometry, [True, True, False])
    names = [e.name for e in prof.events()]
    assert names.count("lens::convolution_backward") == 1
    assert conv_packed.PROFILER_NAMES[_ATEN] == "lens::convolution_backward"  # (profiling.py's _CALLED_AS)


class _Net(nn.Module):
    """conv + BN + ReLU, a 5x5 depthwise block (BN, hardswish), a 3x3 depthwise one, a pointwise projection."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.dw5 = nn.Sequential(nn.Conv2d(16, 16, 5, 1, 2, groups=16, bias=False), nn.BatchNorm2d(16),
                                 nn.Hardswish())
        self.dw5s2 = nn.Conv2d(16, 16, 5, 2, 2, groups=16, bias=True)
        self.dw3 = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pw = nn.Conv2d(16, 24, 1)

    def forward(self, x):
        return self.pw(self.dw3(self.dw5s2(self.dw5(self.stem(x))))).mean((2, 3))


def test_a_compiled_training_step_takes_the_path_and_matches_eager_after_three_sgd_steps():
    torch.manual_seed(0)
    eager = _Net()
    lens = _Net()
    lens.load_state_dict(eager.state_dict())
    compiled = torch.compile(lens, backend="lens")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, lens)]
    x = torch.randn(2, 3, 32, 32)
    before = conv_train.calls
    for _ in range(3):
        for fn, opt in zip((eager, compiled), opts):
            opt.zero_grad()
            fn(x).square().sum().backward()
            opt.step()
    assert conv_train.calls - before == 3 * 2, "the two 5x5 depthwise weight gradients a step were not this module's"
    for (name, a), b in zip(eager.named_parameters(), lens.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
