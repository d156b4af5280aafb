"""Helpers generated code calls at run time (compiler/machine/runtime.py)."""
import torch

from compiler.machine.runtime import with_layout


def test_with_layout_returns_the_tensor_itself_when_its_layout_is_the_traced_one():
    t = torch.randn(2, 3, 4)
    assert with_layout(t, (2, 3, 4), (12, 4, 1)) is t
    one = torch.randn(3, 1, 4)  # a size-1 dim's stride does not matter
    assert with_layout(one, (3, 1, 4), (4, 1, 1)) is one and with_layout(one, (3, 1, 4), (4, 99, 1)) is one


def test_with_layout_copies_into_the_traced_layout_otherwise():
    t = torch.randn(4, 3).t()  # (3, 4) with strides (1, 3)
    out = with_layout(t, (3, 4), (4, 1))
    assert out is not t and out.stride() == (4, 1) and torch.equal(out, t)
    cl = torch.randn(2, 3, 5, 5).contiguous(memory_format=torch.channels_last)
    back = with_layout(cl, (2, 3, 5, 5), (75, 25, 5, 1))
    assert back.is_contiguous() and torch.equal(back, cl)
