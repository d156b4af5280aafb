"""Kernels over symbolic sizes keep the static kernels' strategies in size variants (compiler/codegen/strategies/size_variants.py):
each variant planned from the size hints runs behind a run-time check of the kernel's size arguments, the generic
body serves the other sizes; one compile, no guard, eager's results on both sides of every check."""
import re

import pytest
import torch

from compiler import config
from compiler.codegen.strategies import size_variants
from compiler.cpp_text.math_prelude import PRELUDE_END
from compiler.machine import build_parts
from tests.compiler.test_dynamic import check_dynamic


def _kernels(graph) -> str:
    return graph.code.text.split(PRELUDE_END, 1)[1]


def _checks(code: str) -> list[str]:
    """The kernel's run-time checks, in order (each calls its variant, a function of its own)."""
    return [cond for cond, _ in _calls(code)]


def _calls(code: str) -> list[tuple[str, str]]:
    return re.findall(r"^    (?:else )?if \((.*)\) (\w+)\(.*\);$", code, re.M)


def _function(code: str, name: str) -> str:
    start = code.index(f'extern "C" void {name}(')
    return code[start:code.index("\n}\n", start)]


def _generic(code: str) -> str:
    """What the kernel runs when no check holds."""
    return code[code.rindex("    else\n"):]


@pytest.fixture
def small_streaming(monkeypatch):
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 64 * 1024)  # 16 rows of 1024 floats


def _rows(n):
    """(n, 1024) rows, and a row of another length past the sizes the variants were planned for."""
    return (torch.randn(n, 1024) if n < 1000 else torch.randn(9, 1000),)


def test_softmax_streams_and_defers_its_output_pass_behind_a_check_of_the_row_count(small_streaming):
    graph, = check_dynamic(lambda x: torch.softmax(x, -1), _rows, sizes=(40, 5, 1000, 16, 15))
    code = _kernels(graph)
    checks = _checks(code)
    assert len(checks) == 2, checks  # streaming above 64 KiB, plain stores under it, then the generic body
    assert all("== 1024" in c for c in checks) and ">= 65536" in checks[0] and checks[1].count("!(") == 1
    streaming = _function(code, _calls(code)[0][1])
    assert "lens_stream_line(" in streaming and "lens_prev_row" in streaming and "__builtin_prefetch" in streaming
    assert "#pragma omp parallel if(parallel: " in streaming and "#pragma omp for nowait" in streaming
    assert "alignas(64) float buf1_local_slots[2][1024];" in streaming  # the static row, not a heap row
    generic = _generic(code)
    assert "lens_stream_line(" not in generic and "buf1_local_row" in generic
    plain = _function(code, _calls(code)[1][1])
    assert "lens_stream_line(" not in plain and "float buf1_local[1024]" in plain  # (rows of 1024: no heap row)


def test_column_sum_splits_rows_across_threads_from_64_rows():
    graph, = check_dynamic(lambda x: x.sum(0), lambda n: (torch.randn(n, 256) if n < 1000 else torch.randn(70, 200),),
                           sizes=(300, 10, 64, 63, 1000), atol=1e-4, rtol=1e-4)
    code = _kernels(graph)
    checks = _checks(code)
    assert checks[0].endswith(">= 64") and "== 256" in checks[0], checks
    split = _function(code, _calls(code)[0][1])
    assert "lens_team" in split and "lens_row" in split
    assert "lens_team" not in _generic(code)


def test_layer_norm_over_a_dynamic_batch_needs_no_generic_body_past_its_variants(small_streaming):
    ln = torch.nn.LayerNorm(1024).eval()
    with torch.no_grad():
        graph, = check_dynamic(lambda x: ln(x), lambda n: (torch.randn(n, 1024),), sizes=(40, 3, 17),
                               atol=1e-4, rtol=1e-4)
    code = _kernels(graph)
    # (no stride is symbolic: the variant that streams, else the body that equals the generic one)
    assert len(_checks(code)) == 1 and "lens_stream_line(" in code


def test_a_pointwise_kernel_keeps_only_its_streaming_variant(small_streaming):
    graph, = check_dynamic(lambda x: x * 2 + 1, lambda n: (torch.randn(n, 512),), sizes=(40, 5, 33))
    code = _kernels(graph)
    (check, name), = _calls(code)  # (rows of 512 plain stores are the generic body's rows of `s..` with a constant)
    assert "== 512" in check and ">= 65536" in check
    assert "lens_stream_line(" in _function(code, name) and "lens_stream_line(" not in _generic(code)


def test_variants_are_functions_of_their_own_that_the_build_compiles_as_parts(small_streaming):
    graph, = check_dynamic(lambda x: torch.softmax(x, -1), _rows, sizes=(40, 5))
    code = _kernels(graph)
    kernel = re.findall(r'^extern "C" void (cpp_fused\w+)\(', code, re.M)[-1]
    names = [name for _, name in _calls(code)]
    assert names == [f"{kernel}_v0", f"{kernel}_v1"]
    dispatcher = code[code.index(f'extern "C" void {kernel}('):]
    for name in names:  # defined before the kernel, declared in it (its part may not hold the definition)
        assert code.index(f'extern "C" void {name}(') < code.index(dispatcher)
        assert f"    void {name}(const float* __restrict__ in_ptr0" in dispatcher
    rendered, = graph.code.rendered
    assert len(build_parts.units("\n".join(text for text, _ in rendered.lines) + "\n", 1)) == 3


def test_a_variant_of_the_generic_bodys_shape_differs_only_by_constants():
    generic = [("for (int64_t x1 = 0; x1 < s75; x1++)", []), ("out_ptr0[x1 + x0*s75] = tmp8;", [])]
    pinned = [("for (int64_t x1 = 0; x1 < 512; x1++)", []), ("out_ptr0[512*x0 + x1] = tmp8;", [])]
    lanes = [("for (int64_t x1_base = 0; x1_base < 512; x1_base += 16)", []), pinned[1]]
    assert size_variants._shape(pinned, {"s75"}) == size_variants._shape(generic, {"s75"})
    assert size_variants._shape(lanes, {"s75"}) != size_variants._shape(generic, {"s75"})
    assert size_variants._shape(pinned, set()) != size_variants._shape(generic, set())


def test_without_size_variants_a_dynamic_kernel_is_the_generic_body(monkeypatch, small_streaming):
    monkeypatch.setattr(config.cpp, "size_variants", False)
    graph, = check_dynamic(lambda x: torch.softmax(x, -1), _rows, sizes=(40, 5))
    code = _kernels(graph)
    assert not _checks(code) and "lens_stream_line(" not in code


def test_pinned_symbols_are_the_strides_not_the_row_count():
    import sympy

    from compiler.ir.nodes import ComputedBuffer, Layout, Load, index_vars
    from compiler.scheduler import FusedKernel
    rows, cols = sympy.symbols("s0 s1", integer=True, positive=True)
    x0, x1 = index_vars(2)
    lay = Layout((rows, cols), (cols, 1))
    node = ComputedBuffer("buf0", torch.float32, lay, Load(torch.float32, None, "arg0", (x0, x1)), [x0, x1],
                          ["mul"], "mul")
    k = FusedKernel([node], (rows,), False, hints={rows: 4096, cols: 1024})
    assert size_variants.pins(k, {"arg0": (torch.float32, lay)}) == {cols: 1024}
    kernel, layouts = size_variants.pinned(k, {"arg0": (torch.float32, lay)}, {cols: 1024})
    assert kernel.nodes[0].layout.stride == (1024, 1) and layouts["arg0"][1].size == (rows, 1024)


VARIED = {
    "flat_scale": (lambda x: x * 2, lambda n: (torch.randn(n, 512),)),
    "rows_of_100": (lambda x: x * 2 + 1, lambda n: (torch.randn(n, 100),)),
    "softmax_mid_line_rows": (lambda x: torch.softmax(x, -1), lambda n: (torch.randn(n, 1000),)),
    "layer_norm_1000": (lambda x: torch.nn.functional.layer_norm(x, (1000,)), lambda n: (torch.randn(n, 1000),)),
    "var_dim0": (lambda x: x.var(0), lambda n: (torch.randn(n, 70),)),
    "sum_all": (lambda x: x.sum() * 2, lambda n: (torch.randn(n, 1000),)),
    "mean_dim0_then_scale": (lambda x: x.mean(0) * 3, lambda n: (torch.randn(n, 300),)),
}


@pytest.mark.parametrize("name", list(VARIED))
def test_variants_match_eager_on_both_sides_of_their_checks(name, small_streaming):
    fn, make = VARIED[name]
    check_dynamic(fn, make, sizes=(71, 5, 33, 16, 64, 65), atol=1e-4, rtol=1e-4)
