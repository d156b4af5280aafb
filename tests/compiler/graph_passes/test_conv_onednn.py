"""Frozen convolutions as oneDNN's over a prepacked weight with the activation fused (compiler/graph_passes/conv_onednn.py,
compiler/machine/conv_packed.py), against eager on several geometries, activations and dtypes."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from compiler import config
from compiler.debug.graph_source import source_of
from compiler.graph_passes import freezing
from compiler.machine import conv_packed

FOLD = "conv as oneDNN over a prepacked weight"

ACTIVATIONS = {
    "none": lambda t: t,
    "relu": torch.relu,
    "relu_inplace": lambda t: F.relu(t, inplace=True),
    "hardswish": F.hardswish,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu6": F.relu6,
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 0.5),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "hardsigmoid": F.hardsigmoid,
    "method_relu": lambda t: t.relu(),
}


class ConvAct(nn.Module):
    def __init__(self, cin, cout, k, stride=1, padding=0, dilation=1, groups=1, bias=True, act="none"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, bias)
        self.act = ACTIVATIONS[act]

    def forward(self, x):
        return self.act(self.conv(x)) * 2 + 1


def _run(model, x, atol=2e-5, rtol=1e-4):
    """lens's output (compared with eager's) and the folds of the graph freezing made of it."""
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad():
        expected = model(x)
        compiled = torch.compile(model, backend="lens")
        got = compiled(x)
        again = compiled(x)
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    torch.testing.assert_close(again, expected, atol=atol, rtol=rtol)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.is_contiguous() == expected.is_contiguous()  # (eager's layout for the graph's outputs)
    frozen = freezing.FROZEN[before:]
    _run.post_ops = [n.args[7] for f in frozen for n in f.gm.graph.nodes if n.target is conv_packed.CONV2D_ONEDNN]
    return sum(f.folds.get(FOLD, 0) for f in frozen)


POST_OP = {"relu_inplace": "relu", "silu": "swish", "gelu_tanh": "gelu", "relu6": "hardtanh", "method_relu": "relu"}


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_each_activation_is_fused_and_matches_eager(act):
    torch.manual_seed(0)
    assert _run(ConvAct(6, 8, 3, padding=1, act=act).eval(), torch.randn(2, 6, 9, 9)) == 1
    assert _run.post_ops == [POST_OP.get(act, act)]  # the activation is the convolution's post-op


@pytest.mark.parametrize("geometry", [
    dict(cin=8, cout=8, k=3, padding=1, groups=8),  # depthwise
    dict(cin=8, cout=16, k=5, stride=2, padding=2, groups=8),  # depthwise, channel multiplier 2, strided
    dict(cin=12, cout=6, k=3, padding=1, groups=3),  # grouped
    dict(cin=8, cout=16, k=1),  # pointwise
    dict(cin=4, cout=8, k=3, stride=2, dilation=2, padding=2, bias=False),
    dict(cin=3, cout=5, k=(3, 1), padding=(1, 0)),  # rectangular kernel
])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("channels_last", [False, True])
def test_geometries_match_eager(geometry, batch, channels_last):
    torch.manual_seed(0)
    x = torch.randn(batch, geometry["cin"], 11, 13)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    assert _run(ConvAct(**geometry, act="hardswish").eval(), x) == 1


@pytest.mark.parametrize("geometry, taken", [
    (dict(cin=8, cout=8, k=9, padding="same", groups=8), True),  # ConvMixer's depthwise layers
    (dict(cin=6, cout=8, k=(3, 5), padding="same", dilation=2), True),
    (dict(cin=6, cout=8, k=3, padding="valid"), True),
    (dict(cin=6, cout=8, k=4, padding="same"), False),  # (ATen pads one more on the far side: left to ATen)
])
def test_string_paddings_are_explicit_where_they_are_symmetric(geometry, taken):
    torch.manual_seed(0)
    assert _run(ConvAct(**geometry, act="gelu").eval(), torch.randn(1, geometry["cin"], 12, 13)) == int(taken)


def test_squeeze_excitation_convolutions_of_one_pixel_match_eager():
    # (1, C, 1, 1) inputs (a pooled squeeze-excitation input; ATen runs these in _slow_conv2d_forward)
    torch.manual_seed(0)
    assert _run(ConvAct(8, 4, 1, act="relu").eval(), torch.randn(1, 8, 1, 1)) == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_convolutions_are_left_to_their_own_path(dtype):
    torch.manual_seed(0)
    model = ConvAct(6, 8, 3, padding=1, act="relu").eval().to(dtype)
    assert _run(model, torch.randn(2, 6, 9, 9, dtype=dtype), atol=2e-2, rtol=2e-2) == 0


def test_weights_are_packed_once_and_again_after_an_in_place_change():
    torch.manual_seed(0)
    model = ConvAct(6, 8, 3, padding=1, act="silu").eval()
    x = torch.randn(1, 6, 10, 10)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="lens")
        compiled(x)
        packs = conv_packed.packed_count()
        for _ in range(3):
            compiled(x)
        assert conv_packed.packed_count() == packs  # (no pack per call)
        model.conv.weight.mul_(-1)  # freezing computes its constants again, and a fresh constant is packed
        torch.testing.assert_close(compiled(x), model(x), atol=2e-5, rtol=1e-4)


def test_setting_off_leaves_convolutions_to_aten(monkeypatch):
    monkeypatch.setattr(config, "freezing_conv_onednn", False)
    torch.manual_seed(0)
    assert _run(ConvAct(6, 8, 3, padding=1, act="relu").eval(), torch.randn(2, 6, 9, 9)) == 0


def test_output_codes_direct_call_keeps_packs_only_for_registered_weights_and_follows_in_place_changes():
    # conv_packed.conv2d: what output_code.py calls (no dispatcher); same results as lens.conv2d_onednn
    torch.manual_seed(0)
    x, bias = torch.randn(1, 6, 7, 7), torch.randn(8)
    geometry = ([1, 1], [1, 1], [1, 1], 1, "relu", [], "")
    loose = torch.randn(8, 6, 3, 3)
    before = conv_packed.packed_count()
    expected = torch.relu(F.conv2d(x, loose, bias, padding=1))
    torch.testing.assert_close(conv_packed.conv2d(x, loose, bias, *geometry), expected, atol=2e-5, rtol=1e-4)
    assert conv_packed.packed_count() == before  # (not registered: packed for the call alone)
    kept = torch.randn(8, 6, 3, 3)
    conv_packed.register([kept])
    for _ in range(2):
        got = conv_packed.conv2d(x, kept, bias, *geometry)
        torch.testing.assert_close(got, torch.relu(F.conv2d(x, kept, bias, padding=1)), atol=2e-5, rtol=1e-4)
    assert conv_packed.packed_count() == before + 1 and got.is_contiguous(memory_format=torch.channels_last)
    kept.mul_(-1)  # the version counter moves: packed again, never read stale
    torch.testing.assert_close(conv_packed.conv2d(x, kept, bias, *geometry),
                               torch.relu(F.conv2d(x, kept, bias, padding=1)), atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(torch.ops.lens.conv2d_onednn(x, kept, bias, *geometry),
                               conv_packed.conv2d(x, kept, bias, *geometry))


class _ConvNet(nn.Module):
    """A conv net's blocks: a stem with batch norm and hardswish, a depthwise convolution with ReLU, a strided 1x1
    projection, a residual add."""

    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.down = nn.Conv2d(16, 24, 1, stride=2)

    def forward(self, x):
        y = F.hardswish(self.bn(self.stem(x)))
        y = y + self.pw(torch.relu(self.dw(y)))
        return self.down(y)


@pytest.mark.parametrize("ambient", [True, False], ids=["called-in-autocast", "autocast-inside"])
def test_bfloat16_autocast_convolutions_are_onednn_over_bfloat16_packs(ambient):
    """Under bfloat16 autocast the convolutions run as lens.conv2d_onednn in bfloat16 (weights cast once, packed
    once, activations fused, the residual sum fused into the projection before it; the float32 input cast as
    autocast casts it) and match eager's autocast run."""
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no bfloat16 instructions for oneDNN")
    torch.manual_seed(0)
    model = _ConvNet().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5), model.bn.running_var.uniform_(0.5, 2.0)

    def inside(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)
    fn = model if ambient else inside
    x = torch.randn(2, 3, 12, 12)
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=ambient):
        expected = fn(x)
        compiled = torch.compile(fn, backend="lens")
        got, again = compiled(x), compiled(x)
        packs = conv_packed.packed_count()
        compiled(x)
        assert conv_packed.packed_count() == packs  # (packed once)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(again, got, atol=0, rtol=0)
    (frozen,) = freezing.FROZEN[before:]
    calls = [n for n in frozen.gm.graph.nodes if n.target is conv_packed.CONV2D_ONEDNN]
    assert [n.args[7] for n in calls] == ["hardswish", "relu", "none"]
    assert [n.args[-1] for n in frozen.gm.graph.nodes if n.target is conv_packed.CONV2D_ONEDNN_ADD] == ["none"]
    assert frozen.folds[ADD_FOLD] == 1
    assert frozen.folds["autocast weight casts"] == 8  # four weights, four biases (the stem's from its batch norm)


def test_float16_autocast_convolutions_are_left_to_aten():
    torch.manual_seed(0)
    model = _ConvNet().eval()
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        expected, got = model(x), torch.compile(model, backend="lens")(x)
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=3e-2)
    assert sum(f.folds.get(FOLD, 0) for f in freezing.FROZEN[before:]) == 0


ADD_FOLD = "residual add fused into the conv"


def _lens_output(model, x):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(model, backend="lens")(x)


class Residual(nn.Module):
    """A residual block's sum in the ways models write it; `fused`: whether lens.conv2d_onednn_add should take it."""

    def __init__(self, form: str, channels: int = 8) -> None:
        super().__init__()
        self.form = form
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.bn.running_mean.uniform_(-1, 1)
        self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        s = self.stem(x)
        y = self.bn(self.conv(s))
        if self.form == "add":
            return y + s
        if self.form == "radd_relu":
            return F.relu(s + y, inplace=True)
        if self.form == "torch_add_relu":
            return torch.relu(torch.add(y, s))
        if self.form == "iadd":
            y += s
            return y
        if self.form == "shortcut_iadd":  # (the shortcut changes: not fused)
            s += y
            return s * 2
        if self.form == "add_hardswish":  # (oneDNN applies no hardswish after a sum: the sum fused, the act not)
            return F.hardswish(y + s)
        if self.form == "broadcast":  # (a per-channel add is no residual)
            return y + s.mean((2, 3), keepdim=True)
        if self.form == "alpha":
            return torch.add(y, s, alpha=2)
        raise AssertionError(self.form)


@pytest.mark.parametrize("form,fused", [("add", 1), ("radd_relu", 1), ("torch_add_relu", 1), ("iadd", 1),
                                        ("shortcut_iadd", 0), ("add_hardswish", 1), ("broadcast", 0),
                                        ("alpha", 0)])
def test_a_residual_sum_is_fused_into_its_convolution_bitwise_as_the_separate_add(form, fused, monkeypatch):
    torch.manual_seed(0)
    model, x = Residual(form).eval(), torch.randn(2, 3, 12, 12)
    before = len(freezing.FROZEN)
    convs = _run(model, x)
    assert convs == 2
    frozen = freezing.FROZEN[before:]
    assert sum(f.folds.get(ADD_FOLD, 0) for f in frozen) == fused
    adds = [n for f in frozen for n in f.gm.graph.nodes if n.target is conv_packed.CONV2D_ONEDNN_ADD]
    assert len(adds) == fused
    if fused:
        assert adds[0].args[-1] == ("relu" if "relu" in form else "none")
        got = _lens_output(model, x)
        monkeypatch.setattr(config, "freezing_conv_onednn_add", False)
        separate = _lens_output(model, x)
        assert torch.equal(got, separate)  # (one float32 accumulator plus the residual, as the separate add)


@pytest.mark.parametrize("form,groups,fused", [("radd_relu", 1, 1), ("add", 1, 1), ("add", 2, 0)])
def test_a_bfloat16_residual_sum_is_fused_into_an_ungrouped_convolution_within_a_rounding_of_eager(form, groups,
                                                                                                   fused):
    """Under bfloat16 autocast the residual joins the float32 accumulator before the one rounding (eager rounds the
    convolution's output first): within bfloat16's rounding of eager's result. A grouped convolution is left
    unfused (oneDNN would round its output before the sum: no pass saved)."""
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no bfloat16 instructions for oneDNN")
    torch.manual_seed(0)
    model, x = Residual(form).eval(), torch.randn(2, 3, 12, 12)
    if groups > 1:
        model.conv = nn.Conv2d(8, 8, 3, padding=1, groups=groups)
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        got = torch.compile(model, backend="lens")(x)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=2e-2)
    assert sum(f.folds.get(ADD_FOLD, 0) for f in freezing.FROZEN[before:]) == fused


def test_the_fused_sum_follows_a_changed_weight_and_a_changed_residual_input():
    torch.manual_seed(0)
    model, x = Residual("radd_relu").eval(), torch.randn(1, 3, 10, 10)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="lens")
        torch.testing.assert_close(compiled(x), model(x), atol=2e-5, rtol=1e-4)
        model.conv.weight.mul_(-0.5)
        model.stem.bias.add_(1.0)
        torch.testing.assert_close(compiled(x), model(x), atol=2e-5, rtol=1e-4)
        x2 = torch.randn(1, 3, 10, 10).contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(compiled(x2), model(x2), atol=2e-5, rtol=1e-4)


class _LaterStatements(nn.Module):
    """A convolution whose activation, and another whose residual sum and ReLU, are later statements."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        y = F.relu(y)
        z = self.b(y)
        z = z + y
        return F.relu(z)


def test_a_fused_call_keeps_its_convolutions_source_line():
    """The fused call's stack trace is its convolution's (the line `kernel_map.json` and the why-record give it), not
    the later statement of the activation or the sum it took in."""
    import inspect

    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    model = _LaterStatements().eval()
    with torch.no_grad():
        torch.compile(model, backend="lens")(torch.randn(1, 3, 8, 8))
    source, first = inspect.getsourcelines(_LaterStatements.forward)
    line = {text.strip(): first + i for i, text in enumerate(source)}
    fused = {n.target: source_of(n) for f in freezing.FROZEN[before:] for n in f.gm.graph.nodes
             if n.target in (conv_packed.CONV2D_ONEDNN, conv_packed.CONV2D_ONEDNN_ADD)}
    assert {target: (ref.line, ref.code) for target, ref in fused.items()} == {
        conv_packed.CONV2D_ONEDNN: (line["y = self.a(x)"], "y = self.a(x)"),
        conv_packed.CONV2D_ONEDNN_ADD: (line["z = self.b(y)"], "z = self.b(y)")}
