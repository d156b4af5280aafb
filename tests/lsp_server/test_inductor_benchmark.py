"""Tests for parsers/inductor_benchmark.py on the real `output_code.py -p` outputs and Chrome traces in
tests/fixtures/inductor_gpu (torch 2.11 + Triton 3.6 on an H100; torch 2.13 on CPU)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server.parsers.inductor_benchmark import (BENCHMARK_OUTPUT_FILE, BENCHMARK_TRACE_FILE,
                                                   CATEGORY_NAME_LIMIT, BenchmarkOutput, ChromeTrace,
                                                   parse_benchmark_output, parse_chrome_trace,
                                                   read_benchmark_output, read_chrome_trace)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor_gpu"
TRITON_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)'", re.MULTILINE)
# Inductor profiles times * repeat = 10 * 10 runs of the compiled module by default.
PROFILED_RUNS = 100


@dataclass(frozen=True)
class Graph:
    program: str
    folder: Path

    @property
    def output(self) -> BenchmarkOutput:
        return read_benchmark_output(self.folder / BENCHMARK_OUTPUT_FILE)

    @property
    def trace(self) -> ChromeTrace:
        return read_chrome_trace(self.folder / BENCHMARK_TRACE_FILE)

    @property
    def triton_kernels(self) -> set[str]:
        return {m[2] for m in TRITON_KERNEL_DEF.finditer((self.folder / "output_code.py").read_text())}


def fixture_graphs(root: Path) -> list[Graph]:
    programs = json.loads((root / "paths.json").read_text())["programs"]
    return [Graph(name, root / name / rel) for name, rels in programs.items() for rel in rels]


GPU_GRAPHS = fixture_graphs(FIXTURES)
CPU_GRAPH = fixture_graphs(FIXTURES / "cpu")[0]


def graph(program: str, folder_suffix: str = "") -> Graph:
    return next(g for g in GPU_GRAPHS if g.program == program and g.folder.name.endswith(folder_suffix))


def matches_kernel(table_name: str, kernel: str) -> bool:
    """A table name is the kernel name, or its first CATEGORY_NAME_LIMIT characters."""
    return table_name == kernel or (len(table_name) == CATEGORY_NAME_LIMIT and kernel.startswith(table_name))


def line_value(text: str, prefix: str) -> str:
    return next(line[len(prefix):] for line in text.splitlines() if line.startswith(prefix))


def test_fixture_layout_has_forward_backward_pair_and_graph_break_graphs() -> None:
    folders = {name: sorted(g.folder.name for g in GPU_GRAPHS if g.program == name)
               for name in ("pointwise", "softmax", "mlp_train", "graph_break")}
    assert folders["mlp_train"] == ["model__0_backward_3.1", "model__0_forward_1.0"]
    assert folders["graph_break"] == ["model__0_inference_0.0", "model__1_inference_1.1", "model__2_inference_2.2"]
    assert folders["pointwise"] == folders["softmax"] == ["model__0_inference_0.0"]
    facts = json.loads((FIXTURES / "paths.json").read_text())
    assert facts["torch_version"].startswith("2.11") and facts["device"] == "cuda"
    # Paths inside the files are the GPU machine's, under the recorded root.
    readable = (graph("pointwise").folder / "fx_graph_readable.py").read_text()
    assert f"# File: {facts['original_root']}/pointwise/prog.py:" in readable


@pytest.mark.parametrize("g", GPU_GRAPHS, ids=lambda g: f"{g.program}/{g.folder.name}")
def test_every_triton_kernel_of_output_code_is_in_the_category_tables(g: Graph) -> None:
    out = g.output
    triton_rows = [k.name for t in out.categories if t.category.startswith("triton_") for k in t.kernels]
    assert g.triton_kernels, "each fixture graph compiles at least one Triton kernel"
    assert all(any(matches_kernel(row, k) for k in g.triton_kernels) for row in triton_rows)
    assert all(any(matches_kernel(row, k) for row in triton_rows) for k in g.triton_kernels)
    prefixes = {"triton_pointwise": "triton_poi_", "triton_reduction": "triton_red_",
                "triton_persistent_reduction": "triton_per_"}
    for table in out.categories:
        assert table.device == "CUDA"
        if table.category in prefixes:
            assert all(k.name.startswith(prefixes[table.category]) for k in table.kernels)
        if table.category == "unknown":  # cuBLAS / cutlass / memset: never an Inductor kernel
            assert not any(k.name.startswith("triton_") for k in table.kernels)


@pytest.mark.parametrize("g", GPU_GRAPHS, ids=lambda g: f"{g.program}/{g.folder.name}")
def test_category_tables_add_up_and_summary_lines_match_the_text(g: Graph) -> None:
    text = (g.folder / BENCHMARK_OUTPUT_FILE).read_text()
    out = g.output
    for table in out.categories:
        # Percent is of wall time (not of the table), so rows add up to the Total row, not to 100.
        assert table.total_percent is not None and table.total_ms is not None
        assert table.kernel_percent_sum == pytest.approx(table.total_percent, abs=0.01 * len(table.kernels))
        assert sum(k.device_ms for k in table.kernels) == pytest.approx(table.total_ms, rel=1e-5)
    busy = float(line_value(text, "Percent of time when CUDA is busy: ").rstrip("%"))
    assert out.busy_device == "CUDA" and out.busy_percent == busy
    assert sum(t.total_percent or 0.0 for t in out.categories) == pytest.approx(busy, abs=0.02)
    assert out.wall_ms == float(line_value(text, "Total wall time ").removesuffix(" ms"))
    assert out.tabulate is not None and out.tabulate.busy_percent == busy
    assert out.tabulate.wall_ms == pytest.approx(out.wall_ms)
    shares = {s.category: s.percent for s in out.tabulate.shares}
    assert set(shares) == {"triton_pointwise", "triton_reduction", "triton_persistent_reduction",
                           "triton_unknown", "unknown"}
    for category, percent in shares.items():
        table = out.category(category)
        assert percent == (table.total_percent if table else 0.0)
    assert out.trace_path == "/tmp/compiled_module_profile.json" and out.benchmark_name == "None"
    assert out.peak_memory_mb is not None and out.peak_memory_mb > 0
    assert len(out.timings_s) == 2 and not out.no_device


def test_pointwise_values() -> None:
    out = graph("pointwise").output
    assert [t.category for t in out.categories] == ["triton_pointwise"]
    kernels = out.category("triton_pointwise").kernels
    assert [(k.name, k.device_ms, k.count, k.percent) for k in kernels] == [
        ("triton_poi_fused_add_mul_relu_sigmoid_0", 0.00325727, 1.0, 5.91),
        ("triton_poi_fused_exp_mul_slice_1", 0.0014679, 1.0, 2.67)]
    assert (out.busy_percent, out.wall_ms, out.peak_memory_mb) == (8.58, 0.055, 70.255)


def test_backward_graph_has_extern_and_truncated_kernels() -> None:
    backward, forward = graph("mlp_train", "backward_3.1"), graph("mlp_train", "forward_1.0")
    out = backward.output
    assert [t.category for t in out.categories] == ["triton_reduction", "triton_persistent_reduction", "unknown"]
    assert "Memset (Device)" in [k.name for k in out.category("unknown").kernels]
    truncated = [k for k in out.category_kernels if k.truncated]
    # two cuBLAS names and one long fused log_softmax/nll_loss backward kernel
    assert [k.name[:12] for k in truncated] == ["triton_per_f", "sm80_xmma_ge", "void cublasL"]
    assert any(k.name.startswith("triton_per_fused__log_softmax__log_softmax_backward_data") for k in truncated)
    assert out.busy_percent == 25.25 and out.category("unknown").total_percent == 21.02
    # The provenance JSON is written for the forward graph only (torch 2.11).
    assert (forward.folder / "inductor_provenance_tracking_node_mappings.json").is_file()
    assert not (backward.folder / "inductor_provenance_tracking_node_mappings.json").exists()


def test_profiler_table_of_a_gpu_run() -> None:
    text = (graph("pointwise").folder / BENCHMARK_OUTPUT_FILE).read_text()
    profiler = graph("pointwise").output.profiler
    assert profiler is not None and profiler.device == "CUDA"
    assert profiler.columns[:3] == ("Name", "Self CPU %", "Self CPU")
    assert "Self CUDA" in profiler.columns and profiler.columns[-1] == "Input Shapes"
    assert len(profiler.rows) == 10
    first = profiler.rows[0]
    assert (first.name, first.self_device_us, first.calls) == ("triton_poi_fused_add_mul_relu_sigmoid_0", 325.727, 100)
    assert first.input_shapes == "[[1024, 1024], [1024, 1024], [1024, 1024], [1024, 1024], []]"
    assert profiler.self_device_total_us == pytest.approx(
        float(line_value(text, "Self CUDA time total: ").removesuffix("us")))


@pytest.mark.parametrize("g", GPU_GRAPHS, ids=lambda g: f"{g.program}/{g.folder.name}")
def test_chrome_trace_kernels_are_the_table_kernels(g: Graph) -> None:
    trace, out = g.trace, g.output
    assert trace.problem is None and trace.kernels and trace.original_events
    table = {k.name: k for k in out.category_kernels}
    for total in trace.totals():
        row = next((k for name, k in table.items() if matches_kernel(name, total.name)), None)
        assert row is not None, total.name
    trim = json.loads((g.folder / BENCHMARK_TRACE_FILE).read_text())["kernelLensTrim"]
    if trim["kernel_events_kept"] == trim["kernel_events_total"]:  # whole profile kept: times must agree
        for total in trace.totals():
            row = next(k for name, k in table.items() if matches_kernel(name, total.name))
            assert total.calls == round(row.count * PROFILED_RUNS)
            assert total.total_us / PROFILED_RUNS / 1000 == pytest.approx(row.device_ms, rel=1e-4)
    assert all(k.grid and k.block for k in trace.kernels if k.category == "kernel")


def test_cpu_variant_has_no_categories_but_kernel_rows() -> None:
    out = CPU_GRAPH.output
    assert out.no_device and out.busy_percent is None and out.categories == ()
    assert out.profiler is not None and out.profiler.device is None
    (row,) = out.cpu_kernel_rows()
    assert row.name == "graph_0_cpp_fused_add_exp_mul_relu_sigmoid_slice_0" and row.calls == PROFILED_RUNS
    assert "cpp_fused_add_exp_mul_relu_sigmoid_slice_0" in (CPU_GRAPH.folder / "output_code.py").read_text()
    assert out.tabulate is not None and all(s.percent == 0.0 for s in out.tabulate.shares)
    assert out.wall_ms == out.tabulate.wall_ms and out.profiler.self_cpu_total_us == row.self_cpu_us
    (total,) = CPU_GRAPH.trace.totals()
    assert (total.name, total.calls) == (row.name, PROFILED_RUNS)


def test_empty_and_foreign_inputs() -> None:
    assert parse_benchmark_output("") == BenchmarkOutput()
    assert parse_chrome_trace("").problem and parse_chrome_trace("[1, 2]").problem == "no traceEvents list"
    odd = parse_benchmark_output("Total wall time 1.2.3 ms\nPercent of time when CUDA is busy: x%\n"
                                 "Output for tabulate: a\n  == triton_pointwise category kernels == \nKernel\n")
    assert odd.wall_ms is None and odd.busy_percent is None and odd.tabulate is None
    assert [(t.category, t.kernels) for t in odd.categories] == [("triton_pointwise", ())]


REAL_TEXTS = [(g.folder / BENCHMARK_OUTPUT_FILE).read_text() for g in GPU_GRAPHS + [CPU_GRAPH]]
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REAL_TEXTS), st.integers(0, 10_000), st.integers(0, 10_000),
       st.text(max_size=40), st.lists(st.integers(0, 200), max_size=6))
def test_truncated_or_garbled_output_never_raises(text: str, cut: int, at: int, junk: str, drop: list[int]) -> None:
    lines = text[:cut].splitlines()
    lines = [line for i, line in enumerate(lines) if i not in drop]
    lines.insert(min(at, len(lines)), junk)
    out = parse_benchmark_output("\n".join(lines))
    assert isinstance(out, BenchmarkOutput)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text: str) -> None:
    assert isinstance(parse_benchmark_output(text), BenchmarkOutput)
    assert isinstance(parse_chrome_trace(text), ChromeTrace)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=5), st.dictionaries(st.sampled_from(["ph", "cat", "name", "ts", "dur", "args"]),
                                                          json_values))
def test_odd_trace_events_never_raise(events: list[object], event: dict[str, object]) -> None:
    trace = parse_chrome_trace(json.dumps({"traceEvents": [*events, event, {**event, "ph": "X", "cat": "kernel"}]}))
    assert trace.problem is None and all(isinstance(t.total_us, float) for t in trace.totals())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to run torch.compile with Triton")
def test_regenerate_pointwise_on_a_gpu(tmp_path: Path) -> None:
    out_dir, work = tmp_path / "fixtures", tmp_path / "work"
    done = subprocess.run([sys.executable, str(FIXTURES / "regenerate.py"), "--only", "pointwise",
                           "--out", str(out_dir), "--work", str(work)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (fresh,) = fixture_graphs(out_dir)
    out = fresh.output
    names = [k.name for k in out.category("triton_pointwise").kernels]
    assert names and all(any(matches_kernel(n, k) for k in fresh.triton_kernels) for n in names)
    assert out.busy_device == "CUDA" and out.busy_percent and out.busy_percent > 0
    assert {t.name for t in fresh.trace.totals()} <= set(fresh.triton_kernels)
