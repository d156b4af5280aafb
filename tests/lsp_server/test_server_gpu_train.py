"""Issue 47 end-to-end on real GPU runs (committed fixtures from an H100, tests/fixtures/inductor_gpu_train):
cost per line from the user's own torch.profiler trace (forward, backward, optimizer), the compiled chain of a
Triton kernel (SASS/PTX line -> Triton line -> FX node -> user line, and back), the kernel hover's compiled
facts and autotuning, the max-autotune GEMM's choices, and "benchmark one kernel" without a GPU."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

from lsp_server.features.describe import format_ms

TRAIN = FIXTURES / "inductor_gpu_train"


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


async def command(client: LanguageClient, name: str, argument: dict | None = None):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=name, arguments=[argument] if argument is not None else None))


async def hover(client: LanguageClient, path: Path, line0: int, character: int = 4) -> str:
    result = await client.text_document_hover_async(types.HoverParams(doc(path), types.Position(line0, character)))
    return "" if result is None else result.contents.value


def graph_folder(workspace: Path, name: str) -> Path:
    return next(workspace.glob(f"torch_compile_debug/run_*/torchinductor/{name}"))


def trace_events(workspace: Path) -> list[dict]:
    (path,) = workspace.glob("profiler_traces/*.pt.trace.json")
    return json.loads(path.read_text())["traceEvents"]


def entry_of(workspace: Path, kernel: str, key: str) -> Path:
    return next(workspace.glob(f"torch_compile_debug/run_*/triton_cache/{key}/{kernel}.json")).parent


@pytest.fixture
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "ws", getattr(request, "param", "transformer_train"), TRAIN)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_profiler_trace_times_forward_backward_and_optimizer(client: LanguageClient, workspace: Path):
    """Each graph is timed from the user's own loop: a Triton kernel's time is its events' durations over the
    two profiled steps; extern calls (cuBLAS) get the time of the kernels their aten op launched."""
    events = trace_events(workspace)
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert steps == 2
    profile = await command(client, "kernelLens.getProfile")
    graphs = {g["graph_id"]: g for g in profile["graphs"]}
    assert sorted(graphs) == ["model__0_backward_3.1", "model__0_forward_1.0", "model__1_inference_4.2"]
    for graph in graphs.values():
        for kernel in graph["kernels"]:
            if kernel["name"].startswith("triton_"):
                truth_us = sum(e["dur"] for e in events if e.get("cat") == "kernel" and e["name"] == kernel["name"])
                assert kernel["total_ms"] == pytest.approx(truth_us / steps / 1000), kernel["name"]
    # extern calls: every device kernel launched by aten::mm / bmm / addmm inside the compiled graphs
    ops = {e["args"]["External id"]: e["name"] for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    gemm_us = sum(e["dur"] for e in events if e.get("cat") == "kernel"
                  and ops.get(e["args"].get("External id")) in ("aten::mm", "aten::bmm", "aten::addmm"))
    extern_ms = sum(k["total_ms"] for g in graphs.values() for k in g["kernels"] if k["kind"] == "extern")
    assert extern_ms == pytest.approx(gemm_us / steps / 1000)
    forward = graphs["model__0_forward_1.0"]
    assert {c["kind"] for c in forward["categories"]} == {"extern", "persistent_reduction", "pointwise"}
    assert sum(c["total_ms"] for c in forward["categories"]) == \
        pytest.approx(sum(k["total_ms"] for k in forward["kernels"]))
    assert 0 < forward["busy_percent"] < 100 and forward["device"] == "cuda"
    # each extern call is its own row, at its own call in output_code.py
    code = (graph_folder(workspace, "model__0_forward_1.0") / "output_code.py").read_text().splitlines()
    extern_rows = [k for k in forward["kernels"] if k["kind"] == "extern"]
    calls = [n for n, text in enumerate(code) if text.strip().startswith("extern_kernels.")]
    assert sorted(k["line"] for k in extern_rows) == calls
    backward = graphs["model__0_backward_3.1"]
    assert {c["kind"] for c in backward["categories"]} == {"extern", "persistent_reduction", "reduction", "pointwise"}


FORWARD_SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_3"
BACKWARD_SOFTMAX = "triton_per_fused__softmax_backward_data_div_masked_fill_nll_loss_forward_view_12"


async def test_cost_per_line_joins_forward_and_backward_kernels(client: LanguageClient, workspace: Path):
    prog = workspace / "prog.py"
    line = line_of(prog, 'attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)')
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    entry = next(e for e in costs["lines"] if e["line"] == line)
    by_graph = {k["graph_id"] for k in entry["kernels"]}
    assert {"model__0_forward_1.0", "model__0_backward_3.1"} <= by_graph
    names = {k["name"] for k in entry["kernels"]}
    assert FORWARD_SOFTMAX in names
    assert entry["ms"] == pytest.approx(sum(k["ms"] for k in entry["kernels"]))
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        doc(prog), types.Range(types.Position(0, 0), types.Position(120, 0))))
    label = next(h.label for h in hints if h.position.line == line)
    assert names == {BACKWARD_SOFTMAX, FORWARD_SOFTMAX}  # cost first, then the two kernels (backward's graph first)
    assert label == f"{entry['percent']:.1f}% · {format_ms(entry['ms'])} → {BACKWARD_SOFTMAX}, {FORWARD_SOFTMAX}"


async def test_kernel_hover_shows_registers_warps_blocks_and_autotuning(client: LanguageClient, workspace: Path):
    """The launched config of a persistent reduction Inductor autotuned over three configs: its registers from
    cuobjdump agree with the register count Triton's own log printed for the best config."""
    folder = graph_folder(workspace, "model__0_forward_1.0")
    code = folder / "output_code.py"
    name = "triton_per_fused_add_embedding_native_layer_norm_0"
    text = await hover(client, code, line_of(code, f"def {name}("))
    stderr = (workspace / "prog_stderr.txt").read_text()
    best = re.search(rf"Best config for {name}: XBLOCK: (\d+), num_warps: (\d+), .*nreg (\d+), nspill (\d+)", stderr)
    xblock, warps, nreg, nspill = best.groups()
    assert f"{nreg} registers · {nspill} spilled" in text
    r0_block = re.search(r"R0_BLOCK: tl.constexpr = (\d+)", code.read_text().split(f"def {name}(")[1])[1]
    assert f"num_warps={warps} · num_stages=1 · R0_BLOCK={r0_block} (kernel source) · XBLOCK={xblock}" in text
    assert "3 compiled" in text and "**Autotuning**: 3 configs benchmarked" in text
    chosen = next(ln for ln in text.splitlines() if "← chosen" in ln)
    assert f"XBLOCK: {xblock}," in chosen
    (usage,) = [p for p in workspace.glob(f"torch_compile_debug/run_*/triton_cache/*/{name}.res_usage.txt")
                if f"REG:{nreg} " in p.read_text()]
    metadata = usage.parent / f"{name}.json"  # the hover links the entry's metadata
    assert f"cache entry [`{usage.parent.name[:12]}`]({metadata.as_uri()}), .best_config;" in text


async def test_chain_from_sass_line_to_triton_fx_node_and_user_line_and_back(client: LanguageClient, workspace: Path):
    name = "triton_poi_fused_gelu_view_7"
    folder = graph_folder(workspace, "model__0_forward_1.0")
    code = folder / "output_code.py"
    erf_line = line_of(code, "libdevice.erf(") if "libdevice.erf(" in code.read_text() else None
    assert erf_line is not None
    answer = await command(client, "kernelLens.tritonChain", {"uri": code.as_uri(), "line": erf_line})
    assert answer["kernel"] == name and answer["triton"]["line"] == erf_line and answer["precision"] == "line"
    prog = workspace / "prog.py"
    assert answer["source"] == {"uri": prog.as_uri(), "line": line_of(prog, "h = F.gelu(")}
    # the Triton line is the kernel file's own line, the file the IR's loc records name
    (kernel_file,) = {m for p in Path(answer["stages"]["ttir"]["uri"].removeprefix("file://")).parent.glob("*.ttir")
                      for m in re.findall(r'loc\("([^"]+\.py)":', p.read_text())}
    assert Path(kernel_file).read_text().splitlines()[answer["triton"]["kernel_file_line"] - 1].strip() == \
        answer["triton"]["text"]
    assert set(answer["stages"]) == {"ttir", "ttgir", "llir", "ptx", "sass"}
    sass = Path(answer["stages"]["sass"]["uri"].removeprefix("file://"))
    sass_lines = answer["stages"]["sass"]["lines"]
    assert sass_lines and all(re.match(r"\s*/\*[0-9a-f]{4}\*/", sass.read_text().splitlines()[n]) for n in sass_lines)
    back = await command(client, "kernelLens.tritonChain", {"uri": sass.as_uri(), "line": sass_lines[0]})
    assert (back["stage"], back["triton"], back["source"]) == ("sass", answer["triton"], answer["source"])
    ptx = answer["stages"]["ptx"]
    back = await command(client, "kernelLens.tritonChain", {"uri": ptx["uri"], "line": ptx["lines"][0]})
    assert back["triton"]["line"] == erf_line and back["nodes"] == answer["nodes"]


async def test_chain_of_an_inlined_library_line_says_where_it_is_from(client: LanguageClient, workspace: Path):
    """A SASS line of Triton's own library code (a reduction's combine, inlined) has no kernel line to lead to."""
    name = "triton_per_fused_add_embedding_native_layer_norm_0"
    code = graph_folder(workspace, "model__0_forward_1.0") / "output_code.py"
    answer = await command(client, "kernelLens.tritonChain", {"uri": code.as_uri(), "line": line_of(code, "tl.sum(")})
    assert answer["kernel"] == name
    sass = Path(answer["stages"]["sass"]["uri"].removeprefix("file://"))
    lines = sass.read_text().splitlines()
    inlined = next(i for i, text in enumerate(lines) if "triton/language/standard.py" in text) + 1
    assert re.match(r"\s+/\*[0-9a-f]{4}\*/", lines[inlined])
    answer = await command(client, "kernelLens.tritonChain", {"uri": sass.as_uri(), "line": inlined})
    assert answer["error"].startswith(f"line {inlined + 1} is inlined Triton library code (")
    assert "standard.py:" in answer["error"]


@pytest.mark.parametrize("workspace", ["autotune_gemm"], indirect=True)
async def test_max_autotune_gemm_choices_on_the_extern_call_hover(client: LanguageClient, workspace: Path):
    code = graph_folder(workspace, "model__0_inference_0.0") / "output_code.py"
    text = await hover(client, code, line_of(code, "extern_kernels.mm(arg0_1"), 16)
    stderr = (workspace / "prog_stderr.txt").read_text()
    table = re.search(r"^AUTOTUNE mm\(([^)]*)\)\n.*\n.*\n((?:  .*\n)+)", stderr, re.MULTILINE)
    first, second = table.group(2).splitlines()[:2]
    assert f"**Max-autotune** `mm({table.group(1)})`" in text and "chosen `mm`" in text
    assert f"`mm` {first.split()[1]} ms (100.0%) **← chosen**" in text
    assert f"`{second.split()[0]}` {second.split()[1]} ms" in text


def recorded_bench(workspace: Path, graph: str, kernel: str) -> list[str]:
    """The kernel's line of the committed `-k` output, found through its `# kernel path:` comment."""
    code = (graph_folder(workspace, graph) / "output_code.py").read_text().splitlines()
    at = next(i for i, text in enumerate(code) if text.startswith(f"{kernel} = async_compile.triton("))
    path = next(code[i] for i in range(at, 0, -1) if code[i].startswith("# kernel path: "))
    key = Path(path.split(": ", 1)[1]).name[:10]
    table = (graph_folder(workspace, graph) / "benchmark_kernels.txt").read_text().splitlines()
    return next(line.split() for line in table if f" {key} " in line)


async def test_kernel_hover_shows_its_recorded_benchmark(client: LanguageClient, workspace: Path):
    code = graph_folder(workspace, "model__0_forward_1.0") / "output_code.py"
    fields = recorded_bench(workspace, "model__0_forward_1.0", "triton_poi_fused_gelu_view_7")
    text = await hover(client, code, line_of(code, "def triton_poi_fused_gelu_view_7("))
    ms, gbps = float(fields[3].removesuffix("ms")), float(fields[6].removesuffix("GB/s"))
    assert "**Benchmark** (`output_code.py -k`" in text and f"{ms:.3f} ms" in text and f"{gbps:.2f} GB/s" in text


def recorded_variants(workspace: Path, graph: str, kernel: str) -> dict:
    """What the H100 recorded for the kernel's standalone module (regenerate.py --bench-only)."""
    return json.loads((graph_folder(workspace, graph) / "kernel_benchmarks.json").read_text())["kernels"][kernel]


async def test_benchmark_one_kernel_without_a_gpu_says_so(client: LanguageClient, workspace: Path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: test_benchmark_one_kernel_on_the_gpu")
    code = graph_folder(workspace, "model__0_forward_1.0") / "output_code.py"
    answer = await command(client, "kernelLens.benchmarkKernel",
                           {"uri": code.as_uri(), "line": line_of(code, "def triton_poi_fused_gelu_view_7(")})
    assert answer["kernel"] == "triton_poi_fused_gelu_view_7" and "needs a CUDA GPU" in answer["error"]
    fields = recorded_bench(workspace, "model__0_forward_1.0", "triton_poi_fused_gelu_view_7")
    assert answer["recorded"] is True and answer["ms"] == float(fields[3].removesuffix("ms"))
    # and the standalone module's variants the H100 recorded, side by side
    recorded = recorded_variants(workspace, "model__0_forward_1.0", "triton_poi_fused_gelu_view_7")
    assert answer["variants"] == recorded["variants"] and answer["device"] == recorded["device"]
    default, max_autotune = (next(v for v in recorded["variants"] if v["variant"] == n) for n in ("default", "max_autotune"))
    assert f"as compiled {default['ms']:.3f} ms · {default['gb_per_s']:.2f} GB/s ({default['configs_tried']} configs) | " \
           in answer["error"]
    assert f"max-autotune {max_autotune['ms']:.3f} ms · {max_autotune['gb_per_s']:.2f} GB/s " \
           f"({max_autotune['configs_tried']} configs)" in answer["error"]
    bad = await command(client, "kernelLens.benchmarkKernel",
                        {"uri": code.as_uri(), "line": line_of(code, "def triton_poi_fused_gelu_view_7("),
                         "maxAutotune": "yes"})
    assert bad["error"].startswith("benchmarkKernel expects")


@pytest.mark.parametrize("graph,kernel", [("model__0_forward_1.0", "triton_poi_fused_gelu_view_7"),
                                          ("model__0_backward_3.1", "triton_red_fused_sum_1")])
async def test_kernel_hover_shows_the_standalone_variants_side_by_side(client: LanguageClient, workspace: Path,
                                                                        graph: str, kernel: str):
    """The H100's timings of the kernel's standalone module as compiled, with TORCHINDUCTOR_MAX_AUTOTUNE=1 alone
    (Inductor baked max_autotune=False into the kernel: the same configs run) and as max-autotune compiles it."""
    code = graph_folder(workspace, graph) / "output_code.py"
    recorded = recorded_variants(workspace, graph, kernel)
    variants = {v["variant"]: v for v in recorded["variants"]}
    assert set(variants) == {"default", "env_max_autotune", "max_autotune"} and recorded["device"].startswith("NVIDIA")
    assert variants["max_autotune"]["configs_tried"] > (variants["default"]["configs_tried"] or 1)
    assert variants["env_max_autotune"]["configs_tried"] == variants["default"]["configs_tried"]
    text = await hover(client, code, line_of(code, f"def {kernel}("))
    row = next(ln for ln in text.split("\n\n") if ln.startswith("**Benchmark, standalone module**"))
    labels = {"default": "as compiled", "env_max_autotune": "MAX_AUTOTUNE=1 only", "max_autotune": "max-autotune"}
    assert row == f"**Benchmark, standalone module** (kernel_benchmarks.json, {recorded['device']}): " + " | ".join(
        f"{labels[v['variant']]} {v['ms']:.3f} ms · {v['gb_per_s']:.2f} GB/s"
        + (f" ({v['configs_tried']} configs)" if v["configs_tried"] else "") for v in recorded["variants"])


@pytest.mark.gpu
async def test_benchmark_one_kernel_on_the_gpu(client: LanguageClient, workspace: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code = graph_folder(workspace, "model__0_forward_1.0") / "output_code.py"
    answer = await command(client, "kernelLens.benchmarkKernel",
                           {"uri": code.as_uri(), "line": line_of(code, "def triton_poi_fused_gelu_view_7(")})
    assert "error" not in answer, answer
    assert answer["recorded"] is False and answer["ms"] > 0 and answer["gb_per_s"] > 0
    assert [v["variant"] for v in answer["variants"]] == ["default", "max_autotune"]
    assert all(v["ms"] > 0 and v["gb_per_s"] > 0 for v in answer["variants"])
