"""Training graphs' convolutions channels-last (compiler/graph_passes/conv_layout.py) and batch norm of half activations with
float32 parameters as generated kernels (compiler/decompositions/table.py: _mixed_half_batch_norm), against eager."""
import json
import pathlib
import re

import pytest
import torch
import torch.nn.functional as F

from compiler import config
from compiler.graph_passes.conv_layout import conv2d_channels_last

HALF = (torch.bfloat16, torch.float16)


class _Net(torch.nn.Module):
    """Conv-BN-ReLU, a residual Conv-BN, a 1x1 shortcut: the conv net pattern, small."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                                     torch.nn.ReLU())
        self.b = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8))
        self.short = torch.nn.Conv2d(4, 8, 1, bias=True)

    def forward(self, x):
        return torch.relu(self.b(self.a(x)) + self.short(x))


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    net = _Net().train()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_()
                m.running_mean.normal_()
    return net


def _step(net, fn, x):
    """Loss, input gradient, parameter gradients and running statistics after one training step of `fn`."""
    net.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_()
    loss = fn(x)
    loss.backward()
    return [loss, x.grad, *(p.grad for p in net.parameters()), *net.buffers()]


def _graph_folders(tmp_path) -> list[pathlib.Path]:
    return sorted(pathlib.Path(tmp_path).glob("run_*/lens/graph_*"), key=lambda p: int(p.name.split("_")[1]))


def _compiled_step(tmp_path, monkeypatch, net, loss, x):
    """One training step compiled with lens, its debug directory under tmp_path."""
    state = {k: v.clone() for k, v in net.state_dict().items()}
    expected = _step(net, loss, x)
    net.load_state_dict(state)
    torch._dynamo.reset()
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    got = _step(net, torch.compile(loss, backend="lens"), x)
    return got, expected


def _convolution_strides(tmp_path) -> list[tuple[int, ...]]:
    """The strides the forward graph's convolutions read their input with (the `reinterpret` of the call, or
    a graph input's own strides: those are eager's, contiguous)."""
    code = (_graph_folders(tmp_path)[0] / "output_code.py").read_text()
    calls = re.findall(r"aten\.convolution\.default\((\w+)\(?([^\n]*)", code)
    strides = []
    for first, rest in calls:
        m = re.match(r"\w+, \(([\d, ]+)\), \(([\d, ]+)\)", rest) if first == "reinterpret" else None
        strides.append(tuple(int(s) for s in m.group(2).split(",")) if m else ())
    return strides


def _externs(tmp_path) -> list[str]:
    return [k["target"] for g in _graph_folders(tmp_path)
            for k in json.loads((g / "kernel_map.json").read_text())["kernels"] if k["kind"] == "extern"]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_autocast_training_step_runs_convolutions_channels_last_and_matches_eager(dtype, tmp_path, monkeypatch):
    """Under autocast the convolutions of a training step read channels-last inputs (after the first, converted
    once, every activation between them is channels-last), batch norm is generated code (no ATen batch norm
    in either graph), and loss, gradients and running statistics match eager's; the output keeps eager's
    layout."""
    net = _net()
    x = torch.randn(2, 4, 10, 12)

    def loss(x):
        with torch.autocast("cpu", dtype=dtype):
            return net(x).float().square().mean()
    got, expected = _compiled_step(tmp_path, monkeypatch, net, loss, x)
    for g, e in zip(got, expected, strict=True):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, e, atol=2e-2, rtol=2e-2)
    strides = _convolution_strides(tmp_path)
    assert len(strides) == 3, strides
    assert all(s and s[1] == 1 for s in strides), strides  # (channels-last: the channel dimension's stride is 1)
    assert not [t for t in _externs(tmp_path) if "batch_norm" in t], _externs(tmp_path)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_weight_gradients_leave_the_backward_in_the_parameters_layout(dtype, tmp_path, monkeypatch):
    """The compiled backward returns each convolution weight's gradient in the parameter's (contiguous) layout, as
    eager's does: a channels-last one is copied by AccumulateGrad outside the graph on every step. Read by a hook on
    each weight, which sees the gradient before AccumulateGrad does."""
    net = _net()
    seen = {}
    for name, p in net.named_parameters():
        if p.dim() == 4:
            p.register_hook(lambda g, name=name: seen.__setitem__(name, g))  # (the last step's: the compiled one)

    def loss(x):
        with torch.autocast("cpu", dtype=dtype):
            return net(x).float().square().mean()
    x = torch.randn(2, 4, 10, 12)
    got, expected = _compiled_step(tmp_path, monkeypatch, net, loss, x)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=2e-2, rtol=2e-2)
    assert len(seen) == 3 and all(s and s[1] == 1 for s in _convolution_strides(tmp_path))

    def strides(t):  # (a size-1 dimension's stride is no part of the layout)
        return [st for st, n in zip(t.stride(), t.shape) if n > 1]
    for name, p in net.named_parameters():
        if p.dim() == 4:
            assert strides(seen[name]) == strides(p), (name, seen[name].stride(), p.stride())


def test_float32_training_and_inference_keep_eager_layouts(tmp_path, monkeypatch):
    """float32 training steps keep eager's layouts (oneDNN's float32 convolutions gain less than the weight
    gradients' conversions back cost, measured); an inference graph's convolutions are freezing's."""
    net = _net()
    x = torch.randn(2, 4, 10, 12)
    got, expected = _compiled_step(tmp_path, monkeypatch, net, lambda x: net(x).square().mean(), x)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    assert not [s for s in _convolution_strides(tmp_path) if s and s[1] == 1]


def test_setting_off_keeps_eager_layouts(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "train_conv_channels_last", False)
    net = _net()

    def loss(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return net(x).float().square().mean()
    _compiled_step(tmp_path, monkeypatch, net, loss, torch.randn(2, 4, 10, 12))
    assert not [s for s in _convolution_strides(tmp_path) if s and s[1] == 1]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_feature_map_output_keeps_eager_strides(dtype):
    """A graph returning a convolution's output: channels-last inside, eager's contiguous layout outside."""
    conv = torch.nn.Conv2d(3, 6, 3)
    x = torch.randn(2, 3, 9, 9)

    def f(x):
        with torch.autocast("cpu", dtype=dtype):
            return torch.relu(conv(x))
    torch._dynamo.reset()
    expected, got = f(x), torch.compile(f, backend="lens")(x)
    assert got.stride() == expected.stride() and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)
    got.float().sum().backward()  # (and the backward of the kept layout runs)
    assert conv.weight.grad is not None and conv.weight.grad.stride() == conv.weight.stride()


def test_conv2d_channels_last_computes_conv2d():
    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(5, 3, 3, 3), torch.randn(5)
    got = conv2d_channels_last(x, w, b, 1, 1)
    assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got, F.conv2d(x, w, b, 1, 1))


# -- batch norm of half activations ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_half_batch_norm_with_float_parameters_is_generated_and_matches_eager(dtype, channels_last, training,
                                                                              tmp_path, monkeypatch):
    """bfloat16/float16 input, float32 weight, bias and running statistics (autocast's case): generated kernels,
    output within one rounding of eager's, running statistics equal to float32 rounding, gradients close to
    eager's (the saved statistics stay float32, as eager's do)."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 16, 9, 7, generator=g) * 3 + 2).to(dtype)
    x = x.to(memory_format=torch.channels_last) if channels_last else x
    w, b = torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)
    stats = [torch.randn(16, generator=g), torch.rand(16, generator=g) + 0.5]

    def f(x, w, b, mean, var):
        return F.relu(F.batch_norm(x, mean, var, w, b, training=training))

    def run(fn):
        mean, var = (s.clone() for s in stats)
        xx, ww, bb = (t.detach().clone().requires_grad_() for t in (x, w, b))
        out = fn(xx, ww, bb, mean, var)
        out.float().square().sum().backward()
        return out, mean, var, xx.grad, ww.grad, bb.grad
    expected = run(f)
    torch._dynamo.reset()
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    got = run(torch.compile(f, backend="lens"))
    assert got[0].stride() == expected[0].stride()
    ulp = 2.0 ** (-8 if dtype == torch.bfloat16 else -11)
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=ulp)
    torch.testing.assert_close(got[1:3], expected[1:3], atol=1e-6, rtol=1e-6)
    for gg, e in zip(got[3:], expected[3:], strict=True):
        torch.testing.assert_close(gg.float(), e.float(), atol=0.05 * e.float().abs().max().item(), rtol=2e-2)
    assert not [t for t in _externs(tmp_path) if "batch_norm" in t], _externs(tmp_path)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_all_half_batch_norm_keeps_atens_kernel(dtype, tmp_path, monkeypatch):
    """Weight and statistics in the half dtype too: ATen's kernel rounds its scale and shift to the dtype, which
    the decomposition cannot follow, so the op stays ATen's (its float32 saved statistics converted to the
    traced dtype for the generated backward: machine/runtime.py's with_layout); gradients finite and close."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, bias=False), torch.nn.BatchNorm2d(8)).to(dtype).train()
    x = torch.randn(2, 4, 9, 9, dtype=dtype)

    def loss(x):
        return model(x).float().square().mean()
    got, expected = _compiled_step(tmp_path, monkeypatch, model, loss, x)
    for g, e in zip(got, expected, strict=True):
        assert torch.isfinite(g.float()).all()
        torch.testing.assert_close(g.float(), e.float(), atol=5e-2, rtol=5e-2)
    assert [t for t in _externs(tmp_path) if "batch_norm" in t]
