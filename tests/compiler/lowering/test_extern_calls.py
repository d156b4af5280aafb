"""Extern calls get their tensor arguments in a layout ATen's kernels accept (compiler/lowering/extern_calls.py,
compiler/lowering/layouts.py's eager_strides)."""
import pytest
import torch

from compiler import config, pipeline
from compiler.lowering.layouts import eager_strides


class ConvGroupNorm(torch.nn.Module):
    """PoolFormer's pattern: GroupNorm(1, C) over a value computed from a (channels-last, frozen) convolution."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.norm = torch.nn.GroupNorm(1, channels)

    def forward(self, x):
        y = self.conv(x)
        return y + self.norm(y * 2)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("decompose", [False, True])
def test_group_norm_of_a_channels_last_value_runs_as_generated_code(same, batch, grad, decompose, monkeypatch):
    # batch 1: the computed buffer had stride 1 on its size-1 batch dim, which ATen reads as neither memory format,
    # and native_group_norm raised "Expected X.is_contiguous(memory_format)" from the generated code (decompose
    # False: ATen's group norm as an extern call; True: the group norm generated, decompositions/table.py)
    monkeypatch.setattr(config, "decompose_group_norm", decompose)
    torch.manual_seed(0)
    model = ConvGroupNorm().eval()
    x = torch.randn(batch, 3, 12, 12)
    eager_before = len(pipeline.EAGER)
    with torch.set_grad_enabled(grad):
        same(model, x, atol=1e-5, rtol=1e-5)
    assert pipeline.EAGER[eager_before:] == []  # generated code ran: no graph fell back to eager


@pytest.mark.parametrize("size, stride, expected", [
    ((1, 16, 12, 12), (1, 1, 192, 16), (2304, 1, 192, 16)),  # channels-last, batch stride as eager's
    ((1, 16, 12, 12), (7, 144, 12, 1), (2304, 144, 12, 1)),  # contiguous
    ((2, 16, 1, 1), (16, 1, 3, 9), (16, 1, 1, 1)),  # both formats fit: contiguous's strides
    ((1, 4, 1, 6), (0, 1, 5, 4), (24, 1, 24, 4)),  # channels-last with a size-1 height
    ((1, 4, 6), (99, 6, 1), (24, 6, 1)),  # 3-d: row-major only
    ((2, 3), (3, 1), (3, 1)),  # no size-1 dim: as given
    ((1, 3, 4, 4), (1, 32, 8, 2), (1, 32, 8, 2)),  # not dense (a strided view): as given
])
def test_eager_strides(size, stride, expected):
    got = eager_strides(size, stride)
    assert got == expected
    if got != stride:  # a dense layout: ATen's choice of memory format reads it as contiguous in that format
        t = torch.empty_strided(size, got)
        assert t.is_contiguous(memory_format=torch._prims_common.suggest_memory_format(t))
