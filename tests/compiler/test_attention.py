"""CPU attention as two batched GEMMs around one fused softmax kernel (compiler/decompositions/table.py), and the
lowering changes it leans on: reshapes that stay views, dense layouts computed in memory order, a reshape
realized in its producer's shape."""
import re

import pytest
import torch
import torch.nn.functional as F

from compiler import config
from tests.compiler.conftest import assert_same, compile_with_debug


def _layout(t: torch.Tensor, order: str) -> torch.Tensor:
    """`t` (B, H, L, E) copied into memory order `order` (a permutation of "BHLE"), seen as (B, H, L, E)."""
    dense = t.permute(*["BHLE".index(d) for d in order]).contiguous()
    return dense.permute(*[order.index(d) for d in "BHLE"])


def _code(tmp_path, fn, *args):
    with torch.no_grad():
        out, graph = compile_with_debug(tmp_path, fn, *args)
    return out, (graph / "output_code.py").read_text()


def _kernel_calls(code: str) -> int:
    return sum(line.startswith("    cpp_fused") for line in code.split("def call")[1].splitlines())


CASES = {
    "plain": dict(),
    "scale": dict(scale=0.3),
    "causal": dict(is_causal=True),
    "float mask": dict(attn_mask="float"),
    "bool mask": dict(attn_mask="bool"),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("order", ["BHLE", "LBHE", "BLHE"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention_matches_eager_in_every_query_layout(case, order, dtype):
    torch.manual_seed(0)
    B, H, L, S, E = 2, 3, 10, 12, 8
    q = _layout(torch.randn(B, H, L, E, dtype=dtype), order)
    k = _layout(torch.randn(B, H, S, E, dtype=dtype), order)
    v = _layout(torch.randn(B, H, S, E, dtype=dtype), order)
    kwargs = dict(CASES[case])
    if kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = torch.randn(L, S, dtype=dtype)
    elif kwargs.get("attn_mask") == "bool":
        mask = torch.rand(B, 1, L, S) > 0.3
        mask[..., 0] = True  # no row entirely masked (eager's kernels disagree among themselves there)
        kwargs["attn_mask"] = mask

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    with torch.no_grad():
        got = assert_same(fn, q, k, v, atol=1e-5, rtol=1e-5)
        assert got.stride() == fn(q, k, v).stride()  # the query's layout, as ATen's kernel returns it


@pytest.mark.parametrize("kind", ["float", "bool"])
def test_a_query_row_masked_out_whole_gives_zeros_as_eager_does(kind):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 6, 8) for _ in range(3))
    mask = torch.zeros(2, 1, 6, 6) if kind == "float" else torch.ones(2, 1, 6, 6, dtype=torch.bool)
    if kind == "float":
        mask[0, :, 2] = float("-inf")  # batch 0, query 2: every key masked
        mask[1, :, :, 4:] = float("-inf")
    else:
        mask[0, :, 2] = False
        mask[1, :, :, 4:] = False

    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    with torch.no_grad():
        got = assert_same(fn, q, k, v, mask, atol=1e-5, rtol=1e-5)
    assert torch.equal(got[0, :, 2], torch.zeros(2, 8))


def test_attention_runs_as_bmm_softmax_bmm_without_copying_its_inputs(tmp_path):
    q, k, v = (_layout(torch.randn(4, 8, 64, 32), "LBHE") for _ in range(3))

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    out, code = _code(tmp_path, fn, q, k, v)
    torch.testing.assert_close(out, fn(q, k, v), atol=1e-5, rtol=1e-5)
    assert code.count("torch.bmm(") == 2 and "flash_attention_for_cpu.default(" not in code
    # q, k and v are read where they lie (strided batches), only the output is re-laid (in memory order)
    assert "reinterpret(arg0_1, (32, 64, 32), (32, 1024, 1), 0)" in code
    assert "reinterpret(arg1_1, (32, 32, 64), (32, 1, 1024), 0)" in code
    assert _kernel_calls(code) == 2  # the softmax (scale, max, exp, sum, normalize) and the output copy


@pytest.mark.parametrize("limit", ["scores", "keys"])
def test_attention_past_either_limit_stays_one_aten_call(tmp_path, monkeypatch, limit):
    B, H, L, E = 1, 2, 64, 16
    if limit == "scores":
        monkeypatch.setattr(config, "attention_scores_max_bytes", B * H * L * L * 4 - 1)
    else:
        monkeypatch.setattr(config, "attention_max_keys", L - 1)
    _assert_stays_aten_s_flash_kernel(tmp_path, *(torch.randn(B, H, L, E) for _ in range(3)))


def test_attention_over_more_keys_than_the_default_limit_stays_aten_s_flash_kernel(tmp_path):
    q = torch.randn(1, 2, 8, 16)
    k, v = (torch.randn(1, 2, config.attention_max_keys + 1, 16) for _ in range(2))
    _assert_stays_aten_s_flash_kernel(tmp_path, q, k, v)


def _assert_stays_aten_s_flash_kernel(tmp_path, q, k, v):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    out, code = _code(tmp_path, fn, q, k, v)
    torch.testing.assert_close(out, fn(q, k, v), atol=1e-5, rtol=1e-5)
    assert "_scaled_dot_product_flash_attention_for_cpu.default(" in code and "bmm" not in code


def test_attention_in_training_gets_the_flash_backward_the_forward_results_it_needs():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()

    torch._dynamo.reset()
    fn(q, k, v).backward()
    expected = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    torch.compile(fn, backend="lens")(q, k, v).backward()
    for t, e in zip((q, k, v), expected):
        torch.testing.assert_close(t.grad, e, atol=1e-5, rtol=1e-5)


def test_transformer_encoder_matches_eager_with_attention_decomposed():
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
        x = torch.randn(3, 20, 64)
        mask = torch.zeros(3, 20, dtype=torch.bool)
        mask[:, 15:] = True  # padding: keys past 15 masked in every row
        empty = mask.clone()
        empty[1] = True  # a sequence all padding: every row of its scores masked out
        with torch.no_grad():
            assert_same(layer, x, atol=1e-5, rtol=1e-5)
            assert_same(lambda x: layer(x, src_key_padding_mask=mask), x, atol=1e-5, rtol=1e-5)
            assert_same(lambda x: layer(x, src_key_padding_mask=empty), x, atol=1e-5, rtol=1e-5)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


# --- the lowering changes -------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_view_strides_agree_with_tensor_view(seed):
    from compiler.lowering.views import view_strides
    g = torch.Generator().manual_seed(seed)
    ndim = int(torch.randint(1, 5, (), generator=g))
    size = [int(s) for s in torch.randint(1, 5, (ndim,), generator=g)]
    base = torch.empty(size)
    perm = torch.randperm(ndim, generator=g).tolist()
    t = base.permute(*perm)
    if seed % 3 == 0 and t.shape[0] > 1:
        t = t[::2]  # a gap between blocks
    numel = t.numel()
    for new in ([numel], [1, numel, 1], list(t.shape[::-1]), [numel // t.shape[-1], t.shape[-1]] if t.dim() else [1]):
        new = tuple(new)
        try:
            expected = t.view(new).stride()
        except RuntimeError:
            expected = None
        got = view_strides(tuple(t.shape), t.stride(), new)
        if expected is None:
            assert got is None, (t.shape, t.stride(), new, got)
        else:
            assert got is not None and all(a == b for a, b, s in zip(got, expected, new) if s != 1), \
                (t.shape, t.stride(), new, got, expected)


def test_a_transposed_extern_input_is_computed_in_memory_order(tmp_path):
    """mm's (x + 1).t() input is traced as a transposed dense layout: the kernel writes it row by row of
    memory (a buffer of the transposed shape, passed as its transpose), not column by column."""
    x, w = torch.randn(48, 32), torch.randn(48, 16)

    def fn(x, w):
        return torch.mm((x + 1).t(), w)

    out, code = _code(tmp_path, fn, x, w)
    torch.testing.assert_close(out, fn(x, w))
    assert re.search(r"empty_strided(_cpu)?\(\(48, 32\), \(32, 1\)", code)


def test_a_softmax_read_through_a_reshape_is_one_kernel(tmp_path):
    """bmm reads the softmax of (2, 3, 8, 8) scores as (6, 8, 8): the softmax is computed in its own shape,
    where its row reductions and the normalizing pass share one kernel."""
    s, v = torch.randn(2, 3, 8, 8), torch.randn(6, 8, 4)

    def fn(s, v):
        return torch.bmm(torch.softmax(s * 0.5, -1).reshape(6, 8, 8), v)

    out, code = _code(tmp_path, fn, s, v)
    torch.testing.assert_close(out, fn(s, v))
    assert _kernel_calls(code) == 1


def test_relu_over_a_reshaped_product_writes_over_it(tmp_path):
    """The relu between two Linear layers of a (batch, tokens, features) input is computed as
    (batch, tokens, features) over a (batch * tokens, features) product: the same memory, so in place."""
    lin1, lin2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)
    x = torch.randn(4, 16, 32)

    def fn(x):
        return lin2(torch.relu(lin1(x)))

    with torch.no_grad():
        out, code = _code(tmp_path, fn, x)
        torch.testing.assert_close(out, fn(x), atol=1e-5, rtol=1e-5)
    assert re.search(r"buf\d+ = reinterpret\(buf\d+, \(4, 16, 64\), \(1024, 64, 1\), 0\)", code)
    assert not re.search(r"empty_strided(_cpu)?\(\(4, 16, 64\)", code)


def test_a_reshape_that_must_copy_is_computed_in_its_source_shape(tmp_path):
    """(B, L, E) -> (L, B, E) -> (L*B, E) for a product: the copy loops over (L, B, E), reading and writing
    whole rows of E, with no division or modulo in its indices."""
    x, w = torch.randn(4, 16, 64), torch.randn(64, 32)

    def fn(x, w):
        return x.transpose(0, 1).reshape(64, 64) @ w

    out, code = _code(tmp_path, fn, x, w)
    torch.testing.assert_close(out, fn(x, w))
    kernel = code.split('extern "C" void cpp_fused')[1].split("'''")[0]
    assert " / " not in kernel and " % " not in kernel, kernel
