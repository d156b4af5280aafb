"""Inference-graph freezing (compiler/graph_passes/freezing.py) against eager: folds happen, and no change of a parameter after
the compile (in place, through an optimizer, load_state_dict, `p.data = t`, another module instance) ever
gives a stale result."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from compiler import config
from compiler.frontend.dynamo_backend import lens_backend
from compiler.graph_passes import freezing


def _randomize_bn(model: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)
        self.register_buffer("offset", torch.arange(5.0))

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(y.mean((2, 3))) + self.offset * self.fc.bias.sum()


def _net() -> nn.Module:
    torch.manual_seed(0)
    return _randomize_bn(Net()).eval()


def _check(model: nn.Module, compiled, x: torch.Tensor) -> None:
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.fixture
def x():
    return torch.randn(2, 3, 12, 12)


def test_batch_norm_folds_into_conv_and_constants_fold(x):
    torch._dynamo.reset()
    model = _net()
    first = len(freezing.FROZEN)
    compiled = torch.compile(model, backend=lens_backend)
    _check(model, compiled, x)
    (frozen,) = freezing.FROZEN[first:]
    assert frozen.folds["batch_norm"] == 2
    code = frozen.gm.code
    assert "batch_norm" not in code and "offset" not in code  # folded, with the bias sum times the buffer
    assert frozen.refolds == 0


@pytest.mark.parametrize("change", ["mul_", "copy_", "optimizer", "load_state_dict", "data", "running_var"])
def test_a_changed_parameter_is_never_read_stale(x, change):
    torch._dynamo.reset()
    model = _net()
    compiled = torch.compile(model, backend=lens_backend)
    _check(model, compiled, x)
    if change == "mul_":
        with torch.no_grad():
            model.conv.weight.mul_(2)
    elif change == "copy_":
        with torch.no_grad():
            model.bn.bias.copy_(torch.randn(8))
    elif change == "optimizer":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        model(x).square().mean().backward()  # eager: a training step between two compiled inference calls
        opt.step()
        model.eval()
    elif change == "load_state_dict":
        other = _randomize_bn(Net())
        model.load_state_dict(other.state_dict())
    elif change == "data":
        model.conv.weight.data = torch.randn_like(model.conv.weight)
    elif change == "running_var":
        model.bn2.running_var.fill_(4.0)
    _check(model, compiled, x)
    _check(model, compiled, x)  # and again, from the refolded constants


def test_two_instances_sharing_compiled_code_each_get_their_own_constants(x):
    torch._dynamo.reset()
    a, b = _net(), _randomize_bn(Net()).eval()

    @torch.compile(backend=lens_backend)
    def run(model, inp):
        return model(inp)

    for _ in range(2):
        _check(a, lambda t: run(a, t), x)
        _check(b, lambda t: run(b, t), x)


def test_grad_mode_and_setting_off_leave_parameters_as_inputs(x):
    torch._dynamo.reset()
    model = _net()
    first = len(freezing.FROZEN)
    out = torch.compile(model, backend=lens_backend)(x)
    torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)
    assert len(freezing.FROZEN) == first  # grad enabled: training graphs keep their parameters
    torch._dynamo.reset()
    old = config.freezing
    config.freezing = False
    try:
        _check(model, torch.compile(model, backend=lens_backend), x)
    finally:
        config.freezing = old
    assert len(freezing.FROZEN) == first


@pytest.mark.parametrize("setting", ["freezing_conv_channels_last", "freezing_linear_transposed", "freezing_conv_onednn"])
def test_weight_layouts_give_eager_results(x, setting):
    torch._dynamo.reset()
    model = _net()
    old = getattr(config, setting)
    setattr(config, setting, True)
    try:
        compiled = torch.compile(model, backend=lens_backend)
        _check(model, compiled, x)
        with torch.no_grad():
            model.fc.weight.add_(1.0)
            model.conv2.weight.mul_(-1.0)
        _check(model, compiled, x)
    finally:
        setattr(config, setting, old)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocasts_convolution_weights_are_cast_once_after_the_batch_norm_fold(dtype):
    """Under autocast, a convolution's weight and bias, BatchNorm folded into them, are cast to autocast's dtype
    once (the bf16 conv net cast 13 weights and biases on every call: 1.16x Inductor's time, then 0.88x); an
    in-place change of a BatchNorm statistic folds and casts them again."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _randomize_bn(Net()).eval()

    def run(x):
        with torch.autocast("cpu", dtype=dtype):
            return model(x)
    first = len(freezing.FROZEN)
    compiled = torch.compile(run, backend=lens_backend)
    x = torch.randn(2, 3, 16, 16)
    for _ in range(2):
        with torch.no_grad():
            got, expected = compiled(x), run(x)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, atol=5e-2, rtol=5e-2)
        (frozen,) = freezing.FROZEN[first:]
        assert frozen.folds["batch_norm"] == 2
        assert frozen.folds["autocast weight casts"] == 6  # two convolutions' and the Linear's weights and biases
        assert all(c.dtype == dtype for c in frozen.constants if c.dim() == 4)
        with torch.no_grad():
            model.bn.running_var.mul_(2)
    assert frozen.refolds == 1


class _Features(nn.Module):
    """Convolutions whose 4-d activations leave the graph, one flattened by `.view` (which a channels-last
    activation does not allow)."""

    def __init__(self, flatten_by_view: bool):
        super().__init__()
        self.conv, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 3, padding=1)
        self.flatten_by_view = flatten_by_view

    def forward(self, x):
        y = torch.relu(self.conv(x))
        z = self.conv2(y) * 2
        if self.flatten_by_view:
            return z.view(z.shape[0], -1).sum(1)
        return y, z


@pytest.mark.parametrize("flatten_by_view", [False, True])
def test_channels_last_conv_weights_keep_eager_output_layouts(x, flatten_by_view):
    """Frozen conv weights are channels-last (oneDNN then computes channels-last, and the kernels between keep it);
    what the graph returns keeps eager's layout, and a graph that cannot take channels-last activations (a `.view`
    of one) is frozen without it."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Features(flatten_by_view).eval()
    first = len(freezing.FROZEN)
    with torch.no_grad():
        got, want = torch.compile(model, backend=lens_backend)(x), model(x)
    frozen = freezing.FROZEN[first:]  # (with nothing else to fold, a graph kept as it is is not frozen at all)
    assert sum(f.folds["conv weight channels_last"] for f in frozen) == (0 if flatten_by_view else 2)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        assert g.stride() == w.stride()
    if not flatten_by_view:
        assert any(c.dim() == 4 and c.is_contiguous(memory_format=torch.channels_last) and not c.is_contiguous()
                   for c in frozen[0].constants)


class MixedConv(nn.Module):
    """MixNet's block: channel groups through convolutions of their own kernel size, concatenated, then a batch norm
    that folds into no convolution, then a residual add and another batch norm after it."""

    def __init__(self):
        super().__init__()
        self.small, self.large = nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Conv2d(4, 4, 5, padding=2, groups=4)
        self.bn, self.bn_after_add = nn.BatchNorm2d(8), nn.BatchNorm2d(8)

    def forward(self, x):
        a, b = torch.split(x * 2, [4, 4], 1)
        y = torch.relu(self.bn(torch.cat([self.small(a), self.large(b)], 1)))
        return self.bn_after_add(y + x)


AFFINE = "batch_norm as a constant scale and shift"


@pytest.mark.parametrize("change", [None, "running_var", "weight"])
def test_batch_norms_folding_into_no_convolution_are_a_constant_scale_and_shift(change):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _randomize_bn(MixedConv()).eval()
    x = torch.randn(2, 8, 7, 7).contiguous(memory_format=torch.channels_last)
    first = len(freezing.FROZEN)
    compiled = torch.compile(model, backend=lens_backend)
    _check(model, compiled, x)
    (frozen,) = freezing.FROZEN[first:]
    assert frozen.folds[AFFINE] == 2 and "batch_norm" not in frozen.gm.code
    if change == "running_var":
        model.bn.running_var.mul_(3)  # the scale and shift are computed again from the changed statistics
    elif change == "weight":
        with torch.no_grad():
            model.bn_after_add.weight.neg_()
    _check(model, compiled, x)


def test_batch_norm_affine_setting_off_keeps_them(monkeypatch):
    monkeypatch.setattr(config, "freezing_batch_norm_affine", False)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _randomize_bn(MixedConv()).eval()
    first = len(freezing.FROZEN)
    _check(model, torch.compile(model, backend=lens_backend), torch.randn(2, 8, 7, 7))
    assert all(AFFINE not in f.folds for f in freezing.FROZEN[first:])


def test_a_frozen_graph_whose_code_generation_fails_runs_eagerly(monkeypatch, x):
    # AOTAutograd's forward copies the boxed mark of the graph it wraps, yet takes its inputs positionally: the
    # frozen graph once handed it one list inside another when the graph ran eagerly (a code generation failure)
    from compiler import pipeline

    def fail(*args, **kwargs):
        raise TypeError("code generation bug")

    monkeypatch.setattr(pipeline, "generate_output_code", fail)
    monkeypatch.setattr(config, "graph_cache", False)  # (an earlier test's compile of this graph is cached)
    torch._dynamo.reset()
    model = _net()
    first = len(freezing.FROZEN)
    compiled = torch.compile(model, backend=lens_backend)
    _check(model, compiled, x)
    _check(model, compiled, x)
    assert len(freezing.FROZEN) > first and any("code generation bug" in why for _, why in pipeline.EAGER)


class GhostBlock(nn.Module):
    """GhostNet's bottleneck: a concatenation sliced to the output channels, then the residual added in place."""

    def __init__(self):
        super().__init__()
        self.primary, self.cheap = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        a = torch.relu(self.bn(self.primary(x)))
        out = torch.cat([a, self.cheap(a)], 1)[:, :6]
        out += x[:, :6]
        return out



class SkipInitBlock(nn.Module):
    """NFNet's residual branch scaled in place by a learned gain (`out.mul_(self.skipinit_gain)`), the call's result
    unread: dead code to FX, which counts a method call pure."""

    def __init__(self, gain: float):
        super().__init__()
        self.conv, self.gain = nn.Conv2d(8, 8, 1), nn.Parameter(torch.tensor(gain))

    def forward(self, x):
        out = self.conv(x)
        out.mul_(self.gain)
        return out * 0.2 + x

class ChangesAConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 6))

    def forward(self, x):
        w = self.weight * 2  # computed from a parameter alone: a constant, were it not changed below
        w += 1
        return x @ w


class ChangesItsInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)

    def forward(self, x):
        x.mul_(2)
        return self.bn(self.conv(x))


def test_in_place_changes_of_computed_tensors_still_freeze():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _randomize_bn(GhostBlock()).eval()
    first = len(freezing.FROZEN)
    _check(model, torch.compile(model, backend=lens_backend), torch.randn(2, 8, 6, 6))
    (frozen,) = freezing.FROZEN[first:]
    assert frozen.folds["batch_norm"] == 1


@pytest.mark.parametrize("model", [ChangesAConstant, ChangesItsInput])
def test_in_place_changes_of_constants_or_inputs_are_not_frozen(model):
    torch._dynamo.reset()
    torch.manual_seed(0)
    module = _randomize_bn(model()).eval()
    first = len(freezing.FROZEN)
    compiled = torch.compile(module, backend=lens_backend)
    shape = (4, 6) if model is ChangesAConstant else (2, 3, 5, 5)
    x = torch.randn(shape)
    for _ in range(3):  # (a constant changed by each call would drift)
        got_in, want_in = x.clone(), x.clone()
        with torch.no_grad():
            got, want = compiled(got_in), module(want_in)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got_in, want_in)
    assert freezing.FROZEN[first:] == []


@pytest.mark.parametrize("gain", [0.0, 0.5])
@pytest.mark.parametrize("shape,dtype", [((1, 8, 5, 5), torch.float32), ((2, 8, 7, 3), torch.float32),
                                         ((1, 8, 4, 4), torch.float64)])
def test_an_in_place_change_whose_result_is_unread_is_kept(gain, shape, dtype):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = SkipInitBlock(gain).to(dtype).eval()
    first = len(freezing.FROZEN)
    _check(model, torch.compile(model, backend=lens_backend), torch.randn(shape, dtype=dtype))
    assert len(freezing.FROZEN[first:]) == 1  # (frozen: the change lands in a tensor the graph computed)
