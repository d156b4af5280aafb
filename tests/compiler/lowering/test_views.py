"""View lowerings are index rewrites: results equal eager, and no copy kernels appear for pure views."""
import pytest
import torch

from tests.compiler.conftest import assert_same, compile_with_debug

X = torch.randn(6, 10, 4)


@pytest.mark.parametrize("name, fn", [
    ("view", lambda x: x.view(60, 4) + 1),
    ("reshape_noncontig", lambda x: x.transpose(0, 1).reshape(40, 6) * 2),
    ("permute", lambda x: x.permute(2, 0, 1) + 1),
    ("transpose", lambda x: x.transpose(0, 2).exp()),
    ("expand", lambda x: x[:, :1].expand(6, 7, 4) + 1),
    ("unsqueeze_squeeze", lambda x: x.unsqueeze(1).squeeze(1) * 3),
    ("slice_step", lambda x: x[1:5:2, ::3, 1:] + 1),
    ("negative_slice", lambda x: x[-3:, :-2] - 1),
    ("select", lambda x: x[2] + x[:, 3] .sum()),
    ("cat_dim0", lambda x: torch.cat([x, x * 2], 0)),
    ("cat_dim1_uneven", lambda x: torch.cat([x[:, :3], x, x[:, 7:]], 1) + 1),
    ("stack", lambda x: torch.stack([x, x + 1], -1)),
    ("pad", lambda x: torch.nn.functional.pad(x, (1, 2, 0, 3), value=-1.5)),
    ("flatten_t", lambda x: x.flatten(1).t() * 1.5),
    ("split", lambda x: [t * 2 for t in x.split(3, dim=1)]),
    ("chunk_view_outputs", lambda x: x.chunk(2, 0)),
    ("split_sizes_last_dim", lambda x: [t.exp() for t in torch.split(x, [1, 3], -1)]),
    ("split_uneven_tail", lambda x: [t + i for i, t in enumerate(x.split(4, dim=1))]),
    ("split_of_computed", lambda x: [t.sum() for t in (x * 2 + 1).split([2, 2, 6], 1)]),
])
def test_view_ops(name, fn):
    assert_same(fn, X)


def test_view_output_keeps_eager_strides_and_aliasing():
    x = torch.randn(4, 5)
    out = torch.compile(lambda x: x.t(), backend="lens")(x)
    assert out.stride() == x.t().stride()
    assert out.data_ptr() == x.data_ptr()  # a view of the input, as in eager


def test_seed_foo1_is_exact():
    def foo1(x1, x2):
        a = torch.neg(x1)
        b = torch.maximum(x2, a)
        y = torch.cat([b], dim=1)
        return y

    torch.manual_seed(0)
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    assert_same(foo1, x1, x2)


def test_split_pieces_are_views_and_a_convolutions_piece_is_computed_channels_last(tmp_path):
    # MixNet: a computed tensor split by channels, each piece to a convolution of its own kernel size; the pieces
    # are views (no ATen split), each computed straight into a dense channels-last buffer from what the split
    # tensor is computed from (no copy of a strided channel slice inside the convolution)
    torch.manual_seed(0)
    small, large = torch.nn.Conv2d(3, 3, 3, padding=1, groups=3), torch.nn.Conv2d(5, 5, 5, padding=2, groups=5)

    def mixed(x):
        a, b = torch.split(x * 2 + 1, [3, 5], 1)
        return torch.cat([small(a), large(b)], 1)

    x = torch.randn(2, 8, 9, 9).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        out, graph = compile_with_debug(tmp_path, mixed, x)
        torch.testing.assert_close(out, mixed(x), atol=1e-5, rtol=1e-5)
    code = (graph / "output_code.py").read_text()
    assert "split_with_sizes" not in code and "conv_packed.conv2d(" in code
    for channels in (3, 5):  # each piece stored channels-last (channels innermost), densely
        assert f"empty_strided_cpu((2, 9, 9, {channels}), ({81 * channels}, {9 * channels}, {channels}, 1)" in code


def test_a_convolutions_piece_of_a_buffer_others_read_is_copied_densely_by_generated_code(monkeypatch):
    # the split tensor is a buffer (the residual reads it too, and it costs an exp to compute): each convolution's
    # channel slice of it has gaps, which the convolution would copy with ATen; a generated kernel copies it instead
    from compiler.machine import conv_packed
    torch.manual_seed(0)
    small, large = torch.nn.Conv2d(3, 3, 3, padding=1, groups=3), torch.nn.Conv2d(5, 5, 5, padding=2, groups=5)

    def mixed(x):
        h = torch.exp(x) * torch.sigmoid(x)
        a, b = torch.split(h, [3, 5], 1)
        return torch.cat([small(a), large(b)], 1) + h

    dense, call = [], conv_packed.conv2d
    monkeypatch.setattr(conv_packed, "conv2d", lambda x, *a: dense.append(
        x.is_contiguous(memory_format=torch.channels_last)) or call(x, *a))
    x = torch.randn(2, 8, 9, 9).contiguous(memory_format=torch.channels_last)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(mixed, backend="lens")(x), mixed(x), atol=1e-5, rtol=1e-5)
    assert dense == [True, True]
