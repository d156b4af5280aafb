"""native_group_norm as fusable reductions over a view of its input (compiler/decompositions/table.py `group_norm`):
eager's results on contiguous and channels-last inputs, inference and training, with no ATen group norm and no copy of
a channels-last input left in the generated code (PoolFormer's 72 group norms a call each sat behind a copy); half
dtypes keep ATen's kernel."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.compiler.conftest import compile_with_debug

CASES = [(1, 64, (14, 14)), (4, 64, (7, 9)), (32, 64, (5, 5)), (3, 12, (10,)), (2, 8, (3, 4, 5))]


def _net(groups: int, channels: int, dims: int, affine: bool = True) -> nn.Module:
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims](channels, channels, 1)
    return nn.Sequential(conv, nn.GroupNorm(groups, channels, affine=affine), nn.GELU())


def _aten_calls(folder) -> str:
    """The ATen ops the graph's call() makes (`torch.ops.aten.<op>` lines of output_code.py)."""
    code = (folder / "output_code.py").read_text()
    return " ".join(line.split("torch.ops.aten.", 1)[1].split("(", 1)[0] for line in code.splitlines()
                    if "torch.ops.aten." in line)


@pytest.mark.parametrize("groups, channels, spatial", CASES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True])
def test_inference_matches_eager_without_an_aten_group_norm_or_a_copy(groups, channels, spatial, channels_last,
                                                                      tmp_path):
    if channels_last and len(spatial) != 2:
        pytest.skip("channels-last is a 4-d format")
    torch.manual_seed(groups)
    model = _net(groups, channels, len(spatial)).eval()
    with torch.no_grad():  # (the weights as real parameters: affine=True's scale and shift not ones and zeros)
        model[1].weight.normal_(), model[1].bias.normal_()
    x = torch.randn(2, channels, *spatial)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        expected = model(x)
        got, folder = compile_with_debug(tmp_path, model, x)
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)
    assert got.stride() == expected.stride()
    calls = _aten_calls(folder)  # (1-d and 3-d convolutions stay ATen's: only 2-d ones are frozen to oneDNN)
    assert calls in ("", "convolution.default"), calls  # (no group norm, no copy of the input)


def test_training_gradients_match_eager():
    torch.manual_seed(0)
    model = _net(4, 16, 2)
    x = torch.randn(2, 16, 9, 9).contiguous(memory_format=torch.channels_last).requires_grad_()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lens")
    out = compiled(x)
    out.square().sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    expected_out = model(x)
    expected_out.square().sum().backward()
    expected = [x.grad] + [p.grad for p in model.parameters()]
    torch.testing.assert_close(out, expected_out, atol=2e-5, rtol=1e-5)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


def test_without_affine_parameters():
    torch.manual_seed(1)
    model = _net(2, 8, 2, affine=False).eval()
    x = torch.randn(1, 8, 6, 6)
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="lens")(x), model(x), atol=2e-5, rtol=1e-5)


def test_bfloat16_keeps_atens_kernel(tmp_path):
    model = nn.GroupNorm(2, 8).to(torch.bfloat16).eval()
    x = torch.randn(1, 8, 6, 6, dtype=torch.bfloat16)
    with torch.no_grad():
        got, folder = compile_with_debug(tmp_path, model, x)
        assert torch.equal(got, model(x))
    assert _aten_calls(folder) == "native_group_norm.default"
