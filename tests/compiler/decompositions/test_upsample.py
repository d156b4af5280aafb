"""Interpolation of float32/float64 outside autograd stays one ATen call (compiler/decompositions/upsample.py):
eager's exact result, no `_unsafe_index` gathers; with a gradient to trace, torch's decomposition as before."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from compiler import pipeline

aten = torch.ops.aten
CASES = [  # (mode, input shape, interpolate's keywords)
    ("nearest", (1, 5, 7, 9), {"scale_factor": 2}),
    ("nearest", (2, 3, 10, 6), {"size": (7, 13)}),
    ("bilinear", (1, 4, 6, 6), {"scale_factor": 2, "align_corners": False}),
    ("bilinear", (2, 3, 9, 5), {"size": (4, 11), "align_corners": True}),
    ("bicubic", (1, 3, 30, 30), {"size": (28, 28), "align_corners": False}),
    ("bicubic", (1, 2, 5, 7), {"scale_factor": 1.7, "align_corners": False, "recompute_scale_factor": False}),
]
WHOLE = {"nearest": aten.upsample_nearest2d.default, "bilinear": aten.upsample_bilinear2d.default,
         "bicubic": aten.upsample_bicubic2d.default}


def _targets() -> set:
    return {n.target for n in pipeline.COMPILED[-1].gm.graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("mode,shape,kw", CASES, ids=str)
def test_inference_interpolation_is_one_aten_call_with_eager_result(mode, shape, kw, channels_last, dtype):
    torch._dynamo.reset()
    x = torch.randn(shape, dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    fn = lambda x: F.interpolate(x, mode=mode, **kw).relu() + 1  # noqa: E731
    with torch.no_grad():
        out = torch.compile(fn, backend="lens")(x)
        expected = fn(x)
    assert out.shape == expected.shape and torch.equal(out, expected), (out - expected).abs().max()
    targets = _targets()
    assert WHOLE[mode] in targets and aten._unsafe_index.Tensor not in targets, targets


@pytest.mark.parametrize("mode,shape,kw", CASES, ids=str)
def test_training_interpolation_keeps_torchs_decomposition_and_gradients(mode, shape, kw):
    torch._dynamo.reset()
    x = torch.randn(shape, dtype=torch.float64)
    fn = lambda x: (F.interpolate(x, mode=mode, **kw) ** 2).sum()  # noqa: E731
    xc = x.clone().requires_grad_()
    torch.compile(fn, backend="lens")(xc).backward()
    xe = x.clone().requires_grad_()
    fn(xe).backward()
    torch.testing.assert_close(xc.grad, xe.grad)
    assert WHOLE[mode] not in {n.target for c in pipeline.COMPILED[-2:] for n in c.gm.graph.nodes}


@pytest.mark.parametrize("kw", [{"kernel_size": 3, "padding": 1}, {"kernel_size": (2, 3), "stride": 2, "dilation": 1}],
                         ids=str)
def test_inference_unfold_and_fold_are_one_aten_call_each(kw):
    """F.unfold/F.fold (VOLO's outlook attention) outside autograd: ATen's im2col/col2im, eager's exact result; their
    decompositions gather and scatter through ATen index/index_put calls."""
    torch._dynamo.reset()
    x = torch.randn(1, 8, 10, 12)

    def fn(x):
        cols = F.unfold(x, **kw) * 2
        return F.fold(cols, (10, 12), **kw)

    with torch.no_grad():
        out = torch.compile(fn, backend="lens")(x)
    assert torch.equal(out, fn(x))
    targets = _targets()
    assert {aten.im2col.default, aten.col2im.default} <= targets and aten.index.Tensor not in targets, targets


def test_training_unfold_and_fold_keep_their_gradients():
    torch._dynamo.reset()
    x = torch.randn(1, 4, 6, 6, dtype=torch.float64)
    fn = lambda x: (F.fold(F.unfold(x, 3, padding=1) ** 2, (6, 6), 3, padding=1) ** 2).sum()  # noqa: E731
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.compile(fn, backend="lens")(xc).backward()
    fn(xe).backward()
    torch.testing.assert_close(xc.grad, xe.grad)
