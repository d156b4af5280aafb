"""Bfloat16 products from oneDNN's blocked copy of a frozen weight (compiler/machine/gemm.py over gemm_packed.py
`onednn_weight`, where gemm_half.py `packs_weights`): bit for bit ATen's bfloat16 product (which calls the same
oneDNN kernel from the plain weight) in both weight orientations, with and without a bias, at several row counts;
one pack per weight and row count, reused by later calls and made again after an in-place change; the byte cap
counts two bytes an element; the switches and unregistered weights keep ATen's op; generated code calls the helper
for a bf16 product only where packs are on; a compiled bfloat16-autocast model under no_grad takes the packs of its
frozen weight casts and equals eager."""
import gc
import sys

import pytest
import torch

from compiler import config
from compiler.machine import gemm, gemm_half, gemm_packed
from tests.compiler.conftest import compile_with_debug, record_results

pytestmark = pytest.mark.skipif(
    not gemm._onednn_ok() or not gemm_half._cpu_has_dot_products(torch.bfloat16),
    reason="this CPU (or torch's oneDNN) has no bfloat16 dot products (avx512_bf16 / amx_bf16): its bfloat16 "
           "products are float32 ones (gemm_half.py), never packed")

BF16 = torch.bfloat16
M, K, N = 128, 512, 768  # (above config.cpp.onednn_min_macs)


@pytest.fixture
def served(monkeypatch):
    """Packs on, bfloat16 kept native, and what each product got from `onednn_weight` (None: no pack)."""
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    monkeypatch.setattr(config.cpp, "gemm_packed", True)
    monkeypatch.setattr(config.cpp, "half_gemm", "auto")
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", 1 << 62)  # (whatever other tests left packed)
    # (Linear layers stay products of the lowering, which these tests are about, not lens.linear_onednn calls:
    # tests/compiler/graph_passes/test_linear_onednn.py)
    monkeypatch.setattr(config, "freezing_linear_onednn", False)
    yield record_results(monkeypatch, gemm_packed, "onednn_weight")


def bf16(*shape):
    return torch.randn(*shape).to(BF16)


def product(a, b, bias=None):
    m, n = a.shape[0], b.shape[1]
    if bias is None:
        return gemm.mm(a, b, size=(m, n), stride=(n, 1))
    return gemm.addmm(bias, a, b, size=(m, n), stride=(n, 1))


@pytest.mark.parametrize("orientation", ["linear weight (N, K) read transposed", "(K, N) row-major (GPT-2's Conv1D)"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_products_from_a_pack_equal_atens_bitwise_at_every_row_count(served, orientation, with_bias):
    weight = bf16(N, K) if orientation.startswith("linear") else bf16(K, N)
    b = weight.t() if orientation.startswith("linear") else weight
    bias = bf16(N) if with_bias else None
    gemm_packed.register([weight])
    before = gemm_packed.packed_count()
    for k, rows in enumerate((M, 16, 200, M)):  # (the last one reuses the first row count's pack)
        a = bf16(rows, K)
        expected = torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)  # (ATen: oneDNN, plain weight)
        got = product(a, b, bias)
        assert got.dtype == BF16 and torch.equal(got, expected)
        assert torch.equal(got, torch.ops.mkldnn._linear_pointwise(a, b.t(), bias, "none", [], ""))
        assert served[k].is_mkldnn and served[k].dtype == BF16
    assert gemm_packed.packed_count() == before + 3  # (one pack per row count)
    assert served[3] is served[0]


def test_a_pack_is_reused_across_calls_and_made_again_after_an_in_place_change(served):
    weight, a = bf16(N, K), bf16(M, K)
    gemm_packed.register([weight])
    for change in (None, None, lambda: weight.mul_(-2), lambda: weight[0].zero_()):  # (a view: the same counter)
        if change is not None:
            change()
        assert torch.equal(product(a, weight.t()), torch.mm(a, weight.t()))
    assert served[1] is served[0]
    assert served[2] is not served[1] and served[3] is not served[2]


def test_the_byte_cap_counts_two_bytes_an_element(served, monkeypatch):
    weight, a = bf16(N, K), bf16(M, K)
    gemm_packed.register([weight])
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", gemm_packed._PACKED_BYTES + 2 * N * K)  # (just fits)
    held = gemm_packed._PACKED_BYTES
    product(a, weight.t())
    assert served[0] is not None and gemm_packed._PACKED_BYTES == held + 2 * N * K
    few = bf16(16, K)
    assert torch.equal(product(few, weight.t()), torch.mm(few, weight.t()))
    assert served[1] is None  # (a second pack would pass the cap: the plain weight)
    del weight
    gc.collect()
    assert gemm_packed._PACKED_BYTES == held


@pytest.mark.parametrize("case", ["unregistered", "LENS_GEMM_PACKED=0", "LENS_GEMM=aten", "LENS_HALF_GEMM=float32"])
def test_what_is_not_packed_runs_in_atens_op(served, monkeypatch, case):
    weight, a, bias = bf16(N, K), bf16(M, K), bf16(N)
    if case != "unregistered":
        gemm_packed.register([weight])
    switch = {"LENS_GEMM_PACKED=0": ("gemm_packed", False), "LENS_GEMM=aten": ("gemm_library", "aten"),
              "LENS_HALF_GEMM=float32": ("half_gemm", "float32")}.get(case)
    if switch is not None:
        monkeypatch.setattr(config.cpp, *switch)
        assert gemm.fewest_routed_macs(BF16) == sys.maxsize  # (generated code calls ATen's op itself)
    held, onednn_calls = gemm_packed.packed_count(), record_results(monkeypatch, gemm, "_linear")
    assert torch.equal(product(a, weight.t(), bias), torch.addmm(bias, a, weight.t()))
    assert all(p is None for p in served) and gemm_packed.packed_count() == held
    assert onednn_calls == []  # (ATen's op ran it)


def test_half_products_are_routed_only_where_packs_may_serve_them(served, monkeypatch):
    assert gemm.fewest_routed_macs(BF16) == config.cpp.onednn_min_macs
    assert gemm.fewest_routed_macs(torch.float64) == sys.maxsize
    monkeypatch.setattr(gemm_half, "_cpu_has_dot_products", lambda dtype: False)  # (LENS_HALF_GEMM=native on a CPU
    monkeypatch.setattr(config.cpp, "half_gemm", "native")  # without the dot products: oneDNN cannot reorder)
    monkeypatch.setattr(gemm, "_HALF_ROUTES", {})  # (the answers remembered for this CPU)
    assert gemm.fewest_routed_macs(BF16) == sys.maxsize


def test_a_compiled_bf16_autocast_model_uses_packs_of_its_frozen_weights(served):
    """A Linear-ReLU-Linear block under bfloat16 autocast and no_grad, compiled by lens: freezing makes autocast's
    weight casts bfloat16 constants, both products come from their packs and equal eager's bit for bit; after an
    in-place change of a parameter the casts are computed again and packed again."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(K, N), torch.nn.ReLU(), torch.nn.Linear(N, K, bias=False))
    x = torch.randn(2, M // 2, K)

    def bf16_autocast(f):  # (a region per call: autocast caches its casts of parameters for a region's lifetime,
        with torch.autocast("cpu", dtype=BF16):  # unaware of in-place changes, so eager would read a stale cast)
            return f(x)
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="lens")
        before = gemm_packed.packed_count()
        for _ in range(2):
            got = bf16_autocast(compiled)
            assert got.dtype == BF16 and torch.equal(got, bf16_autocast(model))
        assert [p is not None and p.dtype == BF16 for p in served] == [True] * 4
        assert served[2] is served[0] and served[3] is served[1]
        assert gemm_packed.packed_count() == before + 2
        model[0].weight.mul_(0.5)
        assert torch.equal(bf16_autocast(compiled), bf16_autocast(model))
        assert len(served) == 6 and served[4] is not served[0] and served[5] is not served[1]


@pytest.mark.parametrize("case", ["packs on", "LENS_GEMM_PACKED=0", "a weight the graph computes"])
def test_generated_code_calls_the_helper_for_a_bf16_product_only_where_a_pack_may_serve_it(served, monkeypatch,
                                                                                           tmp_path, case):
    """The helper for a Linear's weight (a graph input: a frozen constant); ATen's out= op where packs are off or
    the B operand is computed in the graph (no registered constant can be it: a training graph's casts)."""
    monkeypatch.setattr(config.cpp, "gemm_packed", case != "LENS_GEMM_PACKED=0")
    linear, args = torch.nn.Linear(K, N), (torch.randn(M, K),)
    model = linear
    if case == "a weight the graph computes":
        args += (torch.randn(K, N),)
        model = lambda x, y: torch.addmm(linear.bias, x, torch.relu(y))  # noqa: E731
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        out, graph = compile_with_debug(tmp_path, model, *args)
        assert torch.equal(out, model(*args))
    code = (graph / "output_code.py").read_text()
    calls = [line.strip() for line in code.splitlines() if "addmm(" in line and "def " not in line]
    assert len(calls) == 1, calls
    weight = f"reinterpret(arg1_1, ({K}, {N}), (1, {K}), 0)"  # (the frozen bf16 weight cast, read transposed)
    if case == "packs on":
        assert calls[0] == f"buf1 = gemm.addmm(arg2_1, buf0, {weight}, size=({M}, {N}), stride=({N}, 1))"
        assert "from compiler.machine import gemm" in code and served[-1] is not None
    else:
        assert calls[0] == {"LENS_GEMM_PACKED=0": f"torch.addmm(arg2_1, buf0, {weight}, out=buf1)",
                            "a weight the graph computes": "torch.addmm(arg2_1, buf0, buf1, out=buf2)"}[case]
        assert "from compiler.machine import gemm" not in code and served == []
