"""Matrix products through compiler/machine/gemm.py: ATen's mm or oneDNN, chosen per process; results stay eager's
(within a float32 product's rounding), whichever library runs."""
import json
import logging

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from compiler import config
from compiler.machine import gemm
from tests.compiler.conftest import compile_with_debug


@pytest.fixture
def library(monkeypatch, request):
    """The GEMM library for every product, however small (parametrize indirectly with "aten"/"onednn")."""
    monkeypatch.setattr(config.cpp, "gemm_library", request.param)
    monkeypatch.setattr(config.cpp, "onednn_min_macs", 1)
    if request.param == "onednn" and not gemm._onednn_ok():
        pytest.skip("this torch has no oneDNN")
    return request.param


def ops_run(fn, *args) -> list[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    return [e.name for e in prof.events()]


def close_to_eager(got, expected, k: int):
    """A float32 product of depth k may round differently in another library: within a few ulps of the
    sum of |terms| (randn inputs: ~sqrt(k) per output), never a wrong element."""
    tol = 4 * k * torch.finfo(expected.dtype).eps * (k ** 0.5)
    torch.testing.assert_close(got, expected, atol=tol, rtol=1e-5)


LIBRARIES = pytest.mark.parametrize("library", ["aten", "onednn"], indirect=True)


@LIBRARIES
@pytest.mark.parametrize("m,k,n", [(64, 96, 80), (300, 128, 257), (8, 1024, 8)])
@pytest.mark.parametrize("weight", ["linear", "dense"])
def test_products_match_eager(library, m, k, n, weight):
    x = torch.randn(m, k)
    w = torch.randn(n, k) if weight == "linear" else torch.randn(k, n)
    b = torch.randn(n)
    mat = (lambda: w.t()) if weight == "linear" else (lambda: w)
    fns = {
        "mm": lambda x: torch.relu(x @ mat()),
        "linear": lambda x: x @ mat() + b,  # addmm, the product is the output: the bias stays in the GEMM
        "linear_gelu": lambda x: torch.nn.functional.gelu(x @ mat() + b),
    }
    with torch.no_grad():
        for name, fn in fns.items():
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="lens")
            close_to_eager(compiled(x), fn(x), k)
            ran = ops_run(compiled, x)
            assert ("mkldnn::_linear_pointwise" in ran) == (library == "onednn"), (name, ran)


@LIBRARIES
def test_what_onednn_cannot_take_runs_in_aten(library):
    """Scaled bias, a full bias matrix, float64: ATen's addmm/mm, same results."""
    a, w = torch.randn(40, 64), torch.randn(64, 96)
    cases = [
        (lambda b, a, w: torch.addmm(b, a, w, beta=0.5, alpha=2.0), (torch.randn(96), a, w)),
        (lambda b, a, w: torch.addmm(b, a, w), (torch.randn(40, 96), a, w)),
        (lambda b, a, w: torch.addmm(b, a, w), (torch.randn(96).double(), a.double(), w.double())),
    ]
    with torch.no_grad():
        for fn, args in cases:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="lens")
            close_to_eager(compiled(*args), fn(*args), 64)
            assert "mkldnn::_linear_pointwise" not in ops_run(compiled, *args)


@pytest.mark.parametrize("library", ["onednn"], indirect=True)
def test_large_results_are_computed_in_row_blocks_into_one_buffer(library, monkeypatch):
    monkeypatch.setattr(config.cpp, "onednn_blocked_min_bytes", 95 * 64 * 4)
    monkeypatch.setattr(config.cpp, "onednn_block_bytes", 64 * 4 * 10)  # 10 rows of 64 floats a block
    x, w, b = torch.randn(95, 32), torch.randn(64, 32), torch.randn(64)
    fn = lambda x: x @ w.t() + b  # noqa: E731
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="lens")
        got = compiled(x)
        close_to_eager(got, fn(x), 32)
        assert got.is_contiguous() and got.shape == (95, 64)
        assert ops_run(compiled, x).count("mkldnn::_linear_pointwise") == 10  # ceil(95 / 10)
        monkeypatch.setattr(config.cpp, "onednn_blocked_min_bytes", 95 * 64 * 4 + 1)  # one row less: one call
        assert ops_run(compiled, x).count("mkldnn::_linear_pointwise") == 1


@pytest.mark.parametrize("library", ["onednn"], indirect=True)
def test_training_graphs_get_eager_gradients(library):
    lin1, lin2 = torch.nn.Linear(48, 64), torch.nn.Linear(64, 16)
    x = torch.randn(32, 48, requires_grad=True)
    fn = lambda x: lin2(torch.tanh(lin1(x))).square().sum()  # noqa: E731
    torch._dynamo.reset()
    fn(x).backward()
    expected = [t.grad.clone() for t in (x, lin1.weight, lin2.weight, lin1.bias)]
    for t in (x, lin1.weight, lin2.weight, lin1.bias):
        t.grad = None
    compiled = torch.compile(fn, backend="lens")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        compiled(x).backward()
    assert "mkldnn::_linear_pointwise" in [e.name for e in prof.events()]
    for got, exp in zip((x.grad, lin1.weight.grad, lin2.weight.grad, lin1.bias.grad), expected):
        close_to_eager(got, exp, 64)


def test_generated_code_calls_the_helper_where_a_route_may_take_the_product(tmp_path, monkeypatch):
    """A float32 product of at least gemm.fewest_routed_macs() multiply-adds goes through the helper; one below it
    of sizes known at compile time calls ATen's out= op directly (the helper's checks cost ~5 us a call), named
    aten.mm.out in the kernel map (half products: test_gemm_half_packs.py)."""
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    big, small = torch.nn.Linear(512, 1024), torch.nn.Linear(64, 96)
    rows = -(-gemm.fewest_routed_macs() // (512 * 1024))
    with torch.no_grad():
        _, graph = compile_with_debug(tmp_path, lambda x, y: (torch.relu(big(x)), torch.relu(small(y))),
                                      torch.randn(rows, 512), torch.randn(40, 64))
    code = (graph / "output_code.py").read_text()
    assert "from compiler.machine import gemm" in code
    assert "= gemm.mm(arg" in code and f"size=({rows}, 1024), stride=(1024, 1))" in code
    assert code.count("gemm.mm(") == 1 and "torch.mm(" in code
    targets = sorted(k["target"] for k in json.loads((graph / "kernel_map.json").read_text())["kernels"]
                     if k["kind"] == "extern")
    assert targets == ["aten.mm.default", "aten.mm.out"], targets


@pytest.mark.parametrize("vendor, capability, mkl, expected", [
    ("AuthenticAMD", "AVX512", True, True),  # MKL's generic path, oneDNN's AVX-512 kernels: 2.2x measured
    ("GenuineIntel", "AVX512", True, False),  # MKL at its best: eager's library
    ("AuthenticAMD", "AVX2", True, False),  # not measured: eager's library
    ("AuthenticAMD", "AVX512", False, False),  # ATen's BLAS is not MKL
    ("", "AVX512", True, False),  # vendor unknown
])
def test_auto_takes_onednn_only_where_mkl_takes_a_generic_path(monkeypatch, caplog, vendor, capability, mkl,
                                                                 expected):
    if not gemm._onednn_ok():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    monkeypatch.setattr(gemm, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: mkl)
    gemm._auto_choice.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="compiler.machine.gemm"):
            assert gemm.onednn_is_faster() is expected
            assert gemm.onednn_is_faster() is expected
        said = [r.getMessage() for r in caplog.records if "oneDNN" in r.getMessage()]
        assert said == ([f"large float32 products run in oneDNN: MKL takes a generic path on this {vendor} CPU"]
                        if expected else [])
        a, b = torch.randn(64, 128), torch.randn(128, 96)
        monkeypatch.setattr(config.cpp, "onednn_min_macs", 1)
        assert gemm._uses_onednn(a, b, None, 1, 1) is expected
    finally:
        gemm._auto_choice.cache_clear()


def test_cpu_vendor_reads_this_machine():
    vendor = gemm.cpu_vendor()
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        assert vendor == ""
        return
    assert (f": {vendor}\n" in text) if "vendor_id" in text else vendor == ""


def test_a_wrong_library_name_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(config.cpp, "gemm_library", "mkl")
    with pytest.raises(ValueError, match="LENS_GEMM.*'mkl'.*auto, aten or onednn"):
        gemm.onednn_is_faster()


def test_accuracy_checks_run_products_in_eagers_library():
    import os
    import subprocess
    import sys
    code = "from compiler import config; print(config.cpp.gemm_library)"
    env = {k: v for k, v in os.environ.items() if k != "LENS_GEMM"}
    run = lambda extra: subprocess.run([sys.executable, "-c", code], env={**env, **extra}, text=True,  # noqa: E731
                                       capture_output=True, check=True).stdout.strip()
    assert run({"LENS_CHECK_ACCURACY": "1e-4"}) == "aten"
    assert run({"LENS_CHECK_ACCURACY": ""}) == "auto"
    assert run({"LENS_CHECK_ACCURACY": "1e-4", "LENS_GEMM": "onednn"}) == "onednn"


@pytest.mark.parametrize("lib", ["aten", "onednn"])
def test_profiles_time_each_product_whichever_library_runs_it(tmp_path, lib):
    import json
    import os
    import subprocess
    import sys
    if lib == "onednn" and not gemm._onednn_ok():
        pytest.skip("this torch has no oneDNN")
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch\n"
        "lin = torch.nn.Linear(512, 256)\n"
        "def f(x):\n"
        "    return torch.relu(lin(x)) @ torch.ones(256, 64)\n"
        "with torch.no_grad():\n"
        "    torch.compile(f, backend='lens')(torch.randn(64, 512))\n")
    proc = subprocess.run([sys.executable, "-m", "compiler", "profile", "--iters", "3", "--warmup", "1",
                           str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "LENS_GEMM": lib})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    graph = next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0"))
    kernels = json.loads((graph / "profile.json").read_text())["kernels"]
    products = [k for k in kernels if k["name"].startswith("extern_") and k["name"].endswith("mm")]
    assert len(products) == 2 and all(k["total_ms"] > 0 and k["calls"] == 1 for k in products), kernels
    trace = {e.get("name") for e in json.loads((graph / "trace.json").read_text())["traceEvents"]}
    assert ("lens::mm" in trace) == (lib == "onednn")  # (LENS_GEMM=aten: no route but ATen's, no helper)
    assert ("mkldnn::_linear_pointwise" in trace) == (lib == "onednn")  # the first product (8.4M MACs)
    assert "aten::mm" in trace  # the second, 1M MACs, is below config.cpp.onednn_min_macs


@pytest.mark.parametrize("helper", ["mm", "addmm"])
def test_small_products_skip_the_routing_and_large_ones_take_it(monkeypatch, helper):
    """Below the fewest multiply-adds any other library takes, a product goes straight to ATen's (the checks cost
    more than such a product); at that size and above, oneDNN and the row split are asked first."""
    asked = []
    monkeypatch.setattr(gemm, "_uses_onednn", lambda *a: asked.append("onednn") or False)
    monkeypatch.setattr(gemm, "_row_blocks", lambda *a: asked.append("rows") or False)
    fewest = gemm.fewest_routed_macs()
    for m, expect in ((4, []), (max(1, -(-fewest // (64 * 64))), ["onednn", "rows"])):
        asked.clear()
        a, b, bias = torch.randn(m, 64), torch.randn(64, 64), torch.randn(64)
        if helper == "mm":
            got, want = gemm.mm(a, b, size=(m, 64), stride=(64, 1)), a @ b
        else:
            got, want = gemm.addmm(bias, a, b, size=(m, 64), stride=(64, 1)), torch.addmm(bias, a, b)
        torch.testing.assert_close(got, want)
        assert asked == expect, (m, asked)
