"""oneDNN's blocked copy of a frozen weight (compiler/machine/gemm_packed.py `onednn_weight`), where oneDNN runs
the products (gemm.py): products from the pack equal oneDNN's from the plain weight bit for bit, in both weight
orientations, with and without a bias; the weight is packed once per row count and again after an in-place change
(never read stale); unregistered weights, the switch and the byte cap leave the plain weight; row blocks of a large
result read one pack; a compiled model's products take the packs of its parameters."""
import gc

import pytest
import torch

from compiler import config
from compiler.machine import gemm, gemm_packed
from tests.compiler.conftest import linear_block_follows_weight_changes, record_results

pytestmark = pytest.mark.skipif(not gemm._onednn_ok(), reason="no oneDNN linear op in this torch")

M, K, N = 128, 512, 768  # (above config.cpp.onednn_min_macs)


@pytest.fixture
def served(monkeypatch):
    """oneDNN taking the products, packs on, and what each product got from `onednn_weight` (None: no pack)."""
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    monkeypatch.setattr(config.cpp, "gemm_packed", True)
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", 1 << 62)  # (whatever other tests left packed)
    monkeypatch.setattr(gemm, "onednn_is_faster", lambda: True)
    yield record_results(monkeypatch, gemm_packed, "onednn_weight")


def plain(a, b, bias=None):
    """oneDNN's product from the weight itself (what gemm.py ran before the packs)."""
    return torch.ops.mkldnn._linear_pointwise(a, b.t(), bias, "none", [], "")


@pytest.mark.parametrize("orientation", ["linear weight (N, K) read transposed", "(K, N) row-major (GPT-2's Conv1D)"])
def test_products_from_a_pack_equal_the_plain_weights_bitwise(served, orientation):
    weight = torch.randn(N, K) if orientation.startswith("linear") else torch.randn(K, N)
    b = weight.t() if orientation.startswith("linear") else weight
    a, bias = torch.randn(M, K), torch.randn(N)
    gemm_packed.register([weight])
    before = gemm_packed.packed_count()
    assert torch.equal(gemm.mm(a, b, size=(M, N), stride=(N, 1)), plain(a, b))
    assert torch.equal(gemm.addmm(bias, a, b, size=(M, N), stride=(N, 1)), plain(a, b, bias))
    torch.testing.assert_close(gemm.addmm(bias, a, b, size=(M, N), stride=(N, 1)), torch.addmm(bias, a, b),
                               atol=1e-4, rtol=1e-4)
    assert [p.is_mkldnn for p in served] == [True] * 3
    assert gemm_packed.packed_count() == before + 1  # packed once, at its first product
    a_few = torch.randn(16, K)  # (another row count: a pack of its own)
    assert torch.equal(gemm.mm(a_few, b, size=(16, N), stride=(N, 1)), plain(a_few, b))
    assert gemm_packed.packed_count() == before + 2


def test_a_weight_changed_in_place_is_packed_again(served):
    weight, a = torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([weight])
    for change in (None, lambda: weight.mul_(-2), lambda: weight[0].zero_()):  # (through a view: the same counter)
        if change is not None:
            change()
        assert torch.equal(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), plain(a, weight.t()))
    assert [p is not None for p in served] == [True] * 3
    assert served[0] is not served[1] and served[1] is not served[2]


@pytest.mark.parametrize("case", ["unregistered", "switched off", "past the byte cap"])
def test_what_is_not_packed_runs_from_the_plain_weight(served, monkeypatch, case):
    weight, a = torch.randn(N, K), torch.randn(M, K)
    if case != "unregistered":
        gemm_packed.register([weight])
    if case == "switched off":
        monkeypatch.setattr(config.cpp, "gemm_packed", False)
    if case == "past the byte cap":
        monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", gemm_packed._PACKED_BYTES + 4 * N * K - 1)
    held = gemm_packed.packed_count()
    assert torch.equal(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), plain(a, weight.t()))
    assert served == [None]
    assert gemm_packed.packed_count() == held


def test_a_pack_is_freed_with_its_weight(served):
    weight, a = torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([weight])
    gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1))
    held, held_bytes = gemm_packed.packed_count(), gemm_packed._PACKED_BYTES
    del weight
    gc.collect()
    assert gemm_packed.packed_count() == held - 1
    assert gemm_packed._PACKED_BYTES == held_bytes - 4 * N * K


def test_compiled_linear_layers_use_packs_and_never_read_a_stale_one(served):
    """A Linear-GELU-Linear block compiled by lens under no_grad: its two products come from oneDNN packs of the
    parameters (registered by freezing); after an in-place change of the weights, the next call equals eager's."""
    def first():
        assert [p is not None for p in served] == [True, True]

    def after_change():
        assert [p is not None for p in served] == [True] * 4
        assert served[2] is not served[0] and served[3] is not served[1]
    linear_block_follows_weight_changes(M, K, N, first, after_change)


def test_large_results_in_row_blocks_read_one_pack(served, monkeypatch):
    """Results past `onednn_blocked_min_bytes` are computed in row blocks (gemm.py): every block multiplies against
    the one pack made for the whole product's rows, and the result is the plain weight's."""
    monkeypatch.setattr(config.cpp, "onednn_blocked_min_bytes", 4 * M * N // 2)
    monkeypatch.setattr(config.cpp, "onednn_block_bytes", 4 * N * 40)  # (blocks of 40 rows: 40, 40, 40, 8)
    weight, a, bias = torch.randn(N, K), torch.randn(M, K), torch.randn(N)
    gemm_packed.register([weight])
    before = gemm_packed.packed_count()
    got = gemm.addmm(bias, a, weight.t(), size=(M, N), stride=(N, 1))
    assert served[0] is not None and served[0].is_mkldnn
    assert gemm_packed.packed_count() == before + 1
    torch.testing.assert_close(got, plain(a, weight.t(), bias), atol=1e-5, rtol=1e-5)
