"""Frozen float32 3x3 convolutions by Winograd's F(4x4, 3x3) (compiler/machine/winograd.py): within a few times the
direct convolution's own error against a float64 convolution over sizes, paddings, batches, channel counts that are
not multiples of the 16-lane vector, every activation and the fused residual sum; taken by conv_packed.py only where
its rule says (3x3, stride 1, one group, enough tiles and channels), and off with its setting."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from compiler import config
from compiler.machine import conv_packed, winograd
from tests.compiler.conftest import compile_with_debug


pytestmark = pytest.mark.skipif(not winograd.supported(), reason="no AVX-512: every convolution stays direct "
                                "(winograd.supported)")


@pytest.fixture(scope="module", autouse=True)
def helper():
    assert winograd.available(wait=True), "the helper did not build or load: see its build.log in the cache"


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


ACTIVATIONS = {"none": lambda t: t, "relu": F.relu, "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
               "hardtanh": lambda t: F.hardtanh(t, 0.0, 6.0), "sigmoid": torch.sigmoid, "swish": F.silu,
               "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "tanh": torch.tanh, "gelu": F.gelu,
               "gelu-tanh": lambda t: F.gelu(t, approximate="tanh")}
SCALARS = {"leaky_relu": [0.2], "hardtanh": [0.0, 6.0]}


@pytest.fixture
def any_size(monkeypatch):
    """Every size taken (the transforms' numerics do not depend on the rule that picks the sizes worth it)."""
    monkeypatch.setattr(winograd, "MIN_TILES", 1)
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 1)


def _make(x, weight, bias, padding, attr="none", add=False, post_attr="none", groups=1):
    name, algorithm = ("gelu", "tanh") if attr == "gelu-tanh" else (attr, "")
    out = conv_packed._output_size(x, weight, [padding] * 2, [1, 1], [1, 1])
    return winograd.Convolution.make(list(x.shape), weight, None if bias is None else bias.dtype, [padding] * 2,
                                     [1, 1], [1, 1], groups, name, SCALARS.get(attr, []), algorithm, out, add,
                                     post_attr)


def _case(n, c, h, w, k, seed, bias=True, groups=1):
    g = torch.Generator().manual_seed(seed)
    x = _cl(torch.randn(n, c, h, w, generator=g))
    weight = torch.randn(k, c // groups, 3, 3, generator=g) / (3 * (c // groups) ** 0.5)
    return x, weight, torch.randn(k, generator=g) if bias else None


def _errors(got: torch.Tensor, exact: torch.Tensor) -> tuple[float, float]:
    e = (got.double() - exact).abs()
    return e.pow(2).mean().sqrt().item(), e.max().item()


# (batch, in channels, height, width, out channels, padding, groups): tiles over the edge, no padding, wider padding,
# channel counts with a partial vector (40, 72, 33), a batch, groups (each group's own panels of the products)
SIZES = [(1, 64, 56, 56, 64, 1, 1), (2, 40, 29, 31, 72, 1, 1), (1, 33, 30, 27, 48, 0, 1), (1, 32, 26, 26, 35, 2, 1),
         (3, 48, 17, 19, 32, 1, 1), (1, 96, 18, 21, 64, 1, 2), (2, 160, 14, 14, 128, 1, 4)]


@pytest.mark.parametrize("size", SIZES)
def test_within_a_few_times_the_direct_convolutions_error_against_float64(size, any_size):
    n, c, h, w, k, padding, groups = size
    x, weight, bias = _case(n, c, h, w, k, seed=sum(size), groups=groups)
    conv = _make(x, weight, bias, padding, groups=groups)
    assert conv is not None and conv.fits(x, bias)
    got = conv.run(x, bias)
    exact = F.conv2d(x.double(), weight.double(), bias.double(), padding=padding, groups=groups)
    direct = F.conv2d(x, weight, bias, padding=padding, groups=groups)
    assert got.shape == exact.shape and got.is_contiguous(memory_format=torch.channels_last)
    rmse, worst = _errors(got, exact)
    direct_rmse, direct_worst = _errors(direct, exact)
    assert rmse <= 10 * direct_rmse and worst <= 20 * direct_worst, (rmse, direct_rmse, worst, direct_worst)
    assert rmse < 5e-6 * exact.pow(2).mean().sqrt().item()


@pytest.mark.parametrize("attr", sorted(ACTIVATIONS))
def test_each_activation_is_applied_to_the_biased_sum(attr, any_size):
    x, weight, bias = _case(1, 32, 22, 21, 48, seed=7)
    got = _make(x, weight, bias, 1, attr).run(x, bias)
    expected = ACTIVATIONS[attr](F.conv2d(x.double(), weight.double(), bias.double(), padding=1))
    torch.testing.assert_close(got.double(), expected, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("post_attr", ["none", "relu"])
def test_a_fused_residual_sum_then_its_activation(post_attr, any_size):
    x, weight, bias = _case(2, 48, 20, 20, 64, seed=9)
    other = _cl(torch.randn(2, 64, 20, 20))
    conv = _make(x, weight, bias, 1, add=True, post_attr=post_attr)
    assert not conv.fits(x, bias) and conv.fits(x, bias, other)  # (made for a sum: needs its other operand)
    got = conv.run(x, bias, other)
    expected = F.conv2d(x.double(), weight.double(), bias.double(), padding=1) + other.double()
    torch.testing.assert_close(got.double(), expected.relu() if post_attr == "relu" else expected, atol=5e-5,
                               rtol=1e-4)
    assert torch.equal(other, other.clone())  # (left as it was)


@pytest.mark.parametrize("chunk", [1, 7, 30])
def test_tiles_in_chunks_give_the_one_pass_results_bit_for_bit(chunk, any_size, monkeypatch):
    """A call's tiles in chunks (winograd.chunk_tiles: a partial last one, chunks across the batch's images) compute
    each tile as one pass over all of them does, with the fused residual sum and activation."""
    x, weight, bias = _case(2, 48, 22, 21, 64, seed=11)
    other = _cl(torch.randn(2, 64, 22, 21))
    conv = _make(x, weight, bias, 1, attr="relu", add=True, post_attr="relu")
    whole = conv.run(x, bias, other)
    u_bytes = conv.u.numel() * 4
    assert winograd.chunk_tiles(winograd.tiles(whole.shape), 48, 64, u_bytes) == 2 * 6 * 6  # (one chunk here)
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 36 * 4 * (48 + 64) * chunk)
    monkeypatch.setattr(winograd, "MIN_CHUNK_TILES", 1)
    assert 72 // chunk <= 72 // winograd.chunk_tiles(72, 48, 64, u_bytes) < 72 // chunk + 2
    assert torch.equal(conv.run(x, bias, other), whole)


def test_a_chunk_holds_what_fits_but_never_fewer_than_its_floor_and_a_large_weight_is_read_once():
    per_tile, small = 36 * 4 * (64 + 64), 36 * 64 * 64 * 4
    assert winograd.chunk_tiles(100, 64, 64, small) == 100
    size = max(winograd.CHUNK_BYTES // per_tile, winograd.MIN_CHUNK_TILES)
    chunk = winograd.chunk_tiles(10_000, 64, 64, small)
    assert chunk <= size and -(-10_000 // chunk) == -(-10_000 // size)  # (as few chunks as fit, made equal)
    floor = winograd.MIN_CHUNK_TILES
    assert winograd.chunk_tiles(floor + 4, 512, 512, winograd.MAX_CHUNKED_WEIGHT) == (floor + 5) // 2
    assert winograd.chunk_tiles(10_000, 512, 512, winograd.MAX_CHUNKED_WEIGHT + 4) == 10_000


def test_without_a_bias_and_a_bias_of_another_dtype_is_refused(any_size):
    x, weight, _ = _case(1, 32, 20, 20, 32, seed=4, bias=False)
    conv = _make(x, weight, None, 1)
    torch.testing.assert_close(conv.run(x, None).double(), F.conv2d(x.double(), weight.double(), padding=1),
                               atol=5e-5, rtol=1e-4)
    assert not conv.fits(x, torch.zeros(32)) and not conv.fits(x.double(), None)


def test_what_it_does_not_take():
    x, weight, bias = _case(1, 64, 14, 14, 64, seed=5)
    out = [1, 64, 14, 14]
    assert winograd.takes(x.shape, weight, [1, 1], [1, 1], 1, out)  # (16 tiles)
    assert not winograd.takes(x.shape, weight, [2, 2], [1, 1], 1, [1, 64, 7, 7])  # strided
    assert not winograd.takes(x.shape, weight, [1, 1], [2, 2], 1, [1, 64, 12, 12])  # dilated
    assert not winograd.takes(x.shape, weight[:, :32], [1, 1], [1, 1], 2, out)  # groups of 32 channels: too few
    wide = torch.randn(128, 64, 3, 3)
    assert winograd.takes((1, 128, 14, 14), wide, [1, 1], [1, 1], 2, [1, 128, 14, 14])  # two groups of 64
    assert not winograd.takes((1, 128, 14, 14), wide[:96], [1, 1], [1, 1], 2, [1, 96, 14, 14])  # of 48: not 32s
    many = torch.randn(512, 64, 3, 3)  # 8 groups of 64: more groups than MAX_GROUPS
    assert not winograd.takes((1, 512, 28, 28), many, [1, 1], [1, 1], 8, [1, 512, 28, 28])
    assert winograd.takes((1, 256, 28, 28), many[:256], [1, 1], [1, 1], 4, [1, 256, 28, 28])
    assert not winograd.takes(x.shape, weight[:, :, :1, :1], [1, 1], [1, 1], 1, out)  # 1x1
    assert not winograd.takes(x.shape, weight.double(), [1, 1], [1, 1], 1, out)  # float64
    assert not winograd.takes(x.shape, weight[:32], [1, 1], [1, 1], 1, [1, 32, 14, 14])  # too few channels
    assert not winograd.takes(x.shape, weight[:, :32], [1, 1], [1, 1], 1, out)  # too few input channels
    assert not winograd.takes(x.shape, weight, [1, 1], [1, 1], 1, [1, 64, 7, 7])  # 4 tiles: too few
    assert not winograd.takes(x.shape, weight[:48, :48], [1, 1], [1, 1], 1, [1, 48, 14, 14])  # 48 a group, 16 tiles
    narrow = [1, 32, 28, 28]  # 32 channels: taken from 49 tiles, in whole vectors of 16 only
    assert winograd.takes(narrow, weight[:32, :32], [1, 1], [1, 1], 1, narrow)
    assert not winograd.takes(narrow, weight[:32, :32], [1, 1], [1, 1], 1, [1, 32, 24, 24])  # 36 tiles
    assert not winograd.takes([1, 40, 56, 56], torch.randn(40, 40, 3, 3), [1, 1], [1, 1], 1, [1, 40, 56, 56])
    assert not winograd.takes([1, 24, 56, 56], torch.randn(24, 24, 3, 3), [1, 1], [1, 1], 1, [1, 24, 56, 56])
    assert _make(x, weight, bias, 1, "mish") is None  # (an activation it has no code for: the direct path's)


def test_a_cpu_without_avx512_keeps_every_convolution_direct(monkeypatch):
    x, weight, bias = _case(1, 64, 14, 14, 64, seed=5)
    assert _make(x, weight, bias, 1) is not None
    monkeypatch.setattr(winograd, "supported", lambda: False)
    assert not winograd.takes(x.shape, weight, [1, 1], [1, 1], 1, [1, 64, 14, 14]) and _make(x, weight, bias, 1) is None


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(48, 64, 3, padding=1)
        self.bn = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.small = nn.Conv2d(64, 64, 3, stride=2, padding=1)  # strided: never Winograd's

    def forward(self, x):
        y = F.relu(self.bn(self.conv1(x)))
        return self.small(F.relu(self.conv2(y) + y))


def _compiled(model, x, tmp_path):
    """The compiled model's first call (the helpers are built: the module's fixture), the kinds of convolution its
    calls kept, and its graph's debug folder."""
    conv_packed._RECENT.clear()
    with torch.no_grad():
        out, folder = compile_with_debug(tmp_path, model, x)
        return out, [type(r.packed) for r in conv_packed._RECENT.values()], folder


def _convolution_records(folder) -> dict[str, str]:
    """The why-records of the graph's convolution calls: node -> message."""
    records = json.loads((folder / "why.json").read_text())["records"]
    return {r["nodes"][0]: r["message"] for r in records if r["reason"] == "convolution"}


def test_a_compiled_net_runs_its_3x3_convolutions_by_winograd_matches_eager_and_says_so(monkeypatch, tmp_path):
    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(2, 48, 20, 20)
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    got, kinds, folder = _compiled(model, x, tmp_path / "on")
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert kinds.count(winograd.Convolution) == 2  # conv1 (batch norm folded, ReLU fused), conv2 (+ y, ReLU)
    said = _convolution_records(folder)
    assert len(said) == 3 and all(m.startswith("runs as a oneDNN convolution (lens.conv2d_onednn") for m in
                                  said.values())
    assert sorted("Winograd" in m for m in said.values()) == [False, True, True]  # (the strided one: direct)
    monkeypatch.setattr(config.cpp, "winograd", False)
    monkeypatch.setattr(winograd, "HELPER", winograd.library())
    off, kinds, folder = _compiled(model, x, tmp_path / "off")
    assert winograd.Convolution not in kinds
    assert len(_convolution_records(folder)) == 3
    assert not any("Winograd" in m for m in _convolution_records(folder).values())
    torch.testing.assert_close(off, expected, atol=1e-4, rtol=1e-4)
