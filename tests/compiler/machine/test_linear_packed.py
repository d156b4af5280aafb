"""`lens.linear_onednn`'s kernel (compiler/machine/linear_packed.py): bit for bit oneDNN's `_linear_pointwise` with
the same activation from the plain weight, for registered weights (served from their blocked copy, made once per
row count and made again after an in-place change) and unregistered ones, 2-d and 3-d inputs, a non-contiguous
input, no rows, and a result large enough to be computed in row blocks; its fake kernel's shape and dtype."""
import pytest
import torch

from compiler import config
from compiler.machine import gemm, gemm_half, gemm_packed, linear_packed
from tests.compiler.conftest import record_results

pytestmark = pytest.mark.skipif(
    not gemm._onednn_ok() or not gemm_half._cpu_has_dot_products(torch.bfloat16),
    reason="this CPU (or torch's oneDNN) has no bfloat16 dot products (avx512_bf16 / amx_bf16): lens.linear_onednn "
           "is never put in its graphs (compiler/graph_passes/linear_onednn.py)")

BF16 = torch.bfloat16
K, N = 256, 384
_POINTWISE = torch.ops.mkldnn._linear_pointwise.default
ATTRS = [("none", [], ""), ("relu", [], ""), ("gelu", [], "none"), ("gelu", [], "tanh"), ("swish", [], ""),
         ("sigmoid", [], ""), ("tanh", [], ""), ("hardswish", [], ""), ("hardtanh", [0.0, 6.0], ""),
         ("leaky_relu", [0.2], ""), ("hardsigmoid", [], "")]


@pytest.fixture
def served(monkeypatch):
    """Packs on, with no byte cap in the way; what each call got from `onednn_weight` (None: no pack)."""
    monkeypatch.setattr(config.cpp, "gemm_packed", True)
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", 1 << 62)
    yield record_results(monkeypatch, gemm_packed, "onednn_weight")


def _weights(registered: bool):
    torch.manual_seed(0)
    weight, bias = torch.randn(N, K).to(BF16), torch.randn(N).to(BF16)
    if registered:
        gemm_packed.register([weight, bias])
    return weight, bias


def _reference(x, weight, bias, attr, scalars, algorithm):
    out = _POINTWISE(x.reshape(-1, x.shape[-1]).contiguous(), weight, bias, attr, scalars, algorithm)
    return out.view(*x.shape[:-1], weight.shape[0])


@pytest.mark.parametrize("attr, scalars, algorithm", ATTRS, ids=[f"{a}-{g}" if g else a for a, _, g in ATTRS])
@pytest.mark.parametrize("registered", [True, False], ids=["registered", "unregistered"])
def test_each_activation_is_onednns_from_the_plain_weight_bitwise(served, attr, scalars, algorithm, registered):
    weight, bias = _weights(registered)
    x = torch.randn(3, 40, K).to(BF16)
    got = linear_packed.linear(x, weight, bias, attr, scalars, algorithm)
    assert got.shape == (3, 40, N) and got.dtype == BF16 and got.is_contiguous()
    assert torch.equal(got, _reference(x, weight, bias, attr, scalars, algorithm))
    assert [p is not None for p in served] == [registered]


def test_a_pack_is_made_once_per_row_count_and_again_after_an_in_place_change(served):
    weight, bias = _weights(True)
    before = gemm_packed.packed_count()
    for rows in (64, 64, 32, 64):
        x = torch.randn(rows, K).to(BF16)
        assert torch.equal(linear_packed.linear(x, weight, None, "relu", [], ""),
                           _reference(x, weight, None, "relu", [], ""))
    assert len(served) == 2 and served[1] is not served[0]  # (a call site's pack: no lookup on later calls)
    assert gemm_packed.packed_count() == before + 2
    weight.mul_(0.5)
    x = torch.randn(64, K).to(BF16)
    got = linear_packed.linear(x, weight, bias, "none", [], "")
    assert torch.equal(got, _reference(x, weight, bias, "none", [], ""))
    assert len(served) == 3 and served[2] is not served[0]  # (packed again: the old packs were dropped)


def test_a_non_contiguous_input_and_no_bias(served):
    weight, _ = _weights(True)
    x = torch.randn(K, 2, 30).to(BF16).permute(1, 2, 0)  # (2, 30, K), the channels strided
    assert not x.is_contiguous()
    assert torch.equal(linear_packed.linear(x, weight, None, "gelu", [], "none"),
                       _reference(x, weight, None, "gelu", [], "none"))


def test_no_rows_give_an_empty_result(served):
    weight, bias = _weights(True)
    got = linear_packed.linear(torch.empty(0, 5, K, dtype=BF16), weight, bias, "relu", [], "")
    assert got.shape == (0, 5, N) and got.dtype == BF16 and served == []


def test_a_large_result_computed_in_row_blocks_equals_the_one_call(served, monkeypatch):
    weight, bias = _weights(True)
    x = torch.randn(200, K).to(BF16)
    whole = linear_packed.linear(x, weight, bias, "gelu", [], "tanh")
    monkeypatch.setattr(config.cpp, "onednn_blocked_min_bytes", 1024)
    monkeypatch.setattr(config.cpp, "onednn_block_bytes", 16 * N * 2)  # (16 rows a block: 13 blocks, the last short)
    blocks = record_results(monkeypatch, gemm, "_linear")
    assert torch.equal(linear_packed.linear(x, weight, bias, "gelu", [], "tanh"), whole)
    assert len(blocks) == 13


def test_the_fake_kernel_gives_the_output_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        out = linear_packed.LINEAR_ONEDNN(torch.empty(2, 7, K, dtype=BF16), torch.empty(N, K, dtype=BF16), None,
                                          "none", [], "")
    assert out.shape == (2, 7, N) and out.dtype == BF16
