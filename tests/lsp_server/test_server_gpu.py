"""End-to-end on real GPU Inductor runs (committed fixtures from an H100: Triton kernels, `output_code.py -p`
output): Triton kernels in hover/definition/lens, their measured times, and kernelLens.getProfile."""
from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import GPU_FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

from lsp_server.features.describe import format_ms


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


async def hover(client: LanguageClient, path: Path, line0: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(doc(path), types.Position(line0, 6)))
    return None if result is None else result.contents.value


def graph_folder(workspace: Path, name: str) -> Path:
    return next(workspace.glob(f"torch_compile_debug/run_*/torchinductor/{name}"))


async def get_profile(client: LanguageClient) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.getProfile"))


@pytest.fixture
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    program = getattr(request, "param", "pointwise")
    fixtures = GPU_FIXTURES / "cpu" if program == "cpu" else GPU_FIXTURES
    return gpu_workspace(tmp_path / "ws", "pointwise" if program == "cpu" else program, fixtures)


@pytest_lsp.fixture(config=SERVER)
async def gpu_client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_hover_on_source_line_shows_triton_kernel_and_its_time(gpu_client: LanguageClient, workspace: Path):
    prog = workspace / "prog.py"
    text = await hover(gpu_client, prog, line_of(prog, "x = a * b + c"))
    assert "line 4 became 1 kernel" in text
    assert "`triton_poi_fused_add_mul_relu_sigmoid_0` (pointwise, 3.26 µs (5.9%)" in text
    text = await hover(gpu_client, prog, line_of(prog, "def chain"))
    assert "`chain` compiled into 2 kernels" in text and "async_compile.triton(" in text
    assert "`triton_poi_fused_exp_mul_slice_1` · pointwise · 1.47 µs (2.7%)" in text
    assert "**Structured trace** — `chain`: 1 frame compiled · 1 graph" in text  # its TORCH_TRACE log
    lenses = await gpu_client.text_document_code_lens_async(types.CodeLensParams(doc(prog)))
    titles = [lens.command.title for lens in lenses if lens.range.start.line == line_of(prog, "def chain")]
    assert "2 kernels · triton_poi_fused_add_mul_relu_sigmoid_0, triton_poi_fused_exp_mul_slice_1" in titles
    assert "kernels 0.0047 ms of 0.055 ms wall · cuda busy 8.6%" in titles


async def test_definition_from_triton_line_to_fx_node_to_source(gpu_client: LanguageClient, workspace: Path):
    folder = graph_folder(workspace, "model__0_inference_0.0")
    output_code = folder / "output_code.py"
    to_node = await gpu_client.text_document_definition_async(
        types.DefinitionParams(doc(output_code), types.Position(line_of(output_code, "tmp7 = tl.sigmoid(tmp6)"), 8)))
    readable = folder / "fx_graph_readable.py"
    assert [(loc.uri, loc.range.start.line) for loc in to_node] == [
        (readable.as_uri(), line_of(readable, "torch.ops.aten.sigmoid.default"))]
    to_source = await gpu_client.text_document_definition_async(
        types.DefinitionParams(doc(readable), to_node[0].range.start))
    prog = workspace / "prog.py"
    assert [(loc.uri, loc.range.start.line) for loc in to_source] == [
        (prog.as_uri(), line_of(prog, "y = torch.relu(x).sigmoid() * 0.5"))]
    runs = await gpu_client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))
    assert sorted(r["kind"] for r in runs) == ["inductor", "trace"]  # the trace run yields to the debug dir


async def test_get_profile_has_categories_busy_percent_and_device(gpu_client: LanguageClient):
    profile = await get_profile(gpu_client)
    (graph,) = profile["graphs"]
    assert graph["device"] == "cuda" and graph["busy_percent"] == 8.58 and graph["compiled_ms"] == 0.055
    assert graph["categories"] == [{"kind": "pointwise", "total_ms": 0.00472517, "percent": 8.58}]
    assert [(k["name"], k["kind"], k["calls"], k["total_ms"], k["percent"]) for k in graph["kernels"]] == [
        ("triton_poi_fused_add_mul_relu_sigmoid_0", "pointwise", 1, 0.00325727, 5.91),
        ("triton_poi_fused_exp_mul_slice_1", "pointwise", 1, 0.0014679, 2.67)]
    assert graph["kernels"][0]["source"]["line"] >= 3 and graph["kernels"][0]["uri"].endswith("output_code.py")
    assert {"eager_ms", "speedup"} <= set(graph)


@pytest.mark.parametrize("workspace", ["mlp_train"], indirect=True)
async def test_forward_and_backward_graphs_with_cublas_as_extern(gpu_client: LanguageClient, workspace: Path):
    profile = await get_profile(gpu_client)
    graphs = {g["graph_id"]: g for g in profile["graphs"]}
    assert sorted(graphs) == ["model__0_backward_3.1", "model__0_forward_1.0"]
    forward = {c["kind"]: c["percent"] for c in graphs["model__0_forward_1.0"]["categories"]}
    assert forward == {"persistent_reduction": 2.93, "extern": 14.87}
    assert graphs["model__0_forward_1.0"]["busy_percent"] == 17.81
    backward = {c["kind"] for c in graphs["model__0_backward_3.1"]["categories"]}
    assert backward == {"reduction", "persistent_reduction", "extern"}
    # The backward graph has no provenance JSON: its kernels map through the source-node comments.
    prog = workspace / "prog.py"
    text = await hover(gpu_client, prog, line_of(prog, "logits = model(x)"))
    assert "triton_per_fused_gelu_gelu_backward_native_layer_norm_native_layer_norm_backward_3" in text
    assert "triton_per_fused_gelu_native_layer_norm_0" in text  # and the forward's


@pytest.mark.parametrize("workspace", ["cpu"], indirect=True)
async def test_cpu_benchmark_gets_a_category_breakdown(gpu_client: LanguageClient, workspace: Path):
    (graph,) = (await get_profile(gpu_client))["graphs"]
    assert graph["device"] == "cpu" and graph["compiled_ms"] == 26.742
    (category,) = graph["categories"]
    assert category["kind"] == "pointwise" and category["total_ms"] == pytest.approx(26.28)
    assert category["percent"] == pytest.approx(100 * 26.28 / 26.742)
    assert [k["name"] for k in graph["kernels"]] == ["cpp_fused_add_exp_mul_relu_sigmoid_slice_0"]


async def test_real_inductor_triton_run_cost_per_line_and_linked_lines(gpu_client: LanguageClient, workspace: Path):
    """Issue 33 on a real GPU Inductor run: ms beside the share in inlay hints, lineCosts, and the kernel view's
    links between the user's lines and the Triton kernel's lines."""
    prog = workspace / "prog.py"
    line = line_of(prog, "x = a * b + c")
    hints = await gpu_client.text_document_inlay_hint_async(types.InlayHintParams(
        doc(prog), types.Range(types.Position(0, 0), types.Position(40, 0))))
    label = next(h.label for h in hints if h.position.line == line)
    costs = await gpu_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.lineCosts", arguments=[{"uri": prog.as_uri()}]))
    entry = next(e for e in costs["lines"] if e["line"] == line)
    (kernel,) = entry["kernels"]
    assert kernel["name"] == "triton_poi_fused_add_mul_relu_sigmoid_0" and kernel["lines_sharing"] >= 1
    assert abs(entry["ms"] * kernel["lines_sharing"] - 0.00326) < 0.0005  # the kernel's 3.26 µs, split
    # cost first (VS Code cuts a hint at 43 characters), then the kernel
    assert label == f"{entry['percent']:.1f}% · {format_ms(entry['ms'])} → triton_poi_fused_add_mul_relu_sigmoid_0"
    linked = await gpu_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.linkedLines", arguments=[{"uri": prog.as_uri()}]))
    code = Path(linked["generated_uri"].removeprefix("file://")).read_text().splitlines()
    links = {li["source_line"]: [code[n].strip() for n in li["generated_lines"]] for li in linked["links"]}
    assert "tmp7 = tl.sigmoid(tmp6)" in links[line_of(prog, "torch.relu(x).sigmoid()")]  # a statement
    assert any(".run(" in text for text in links[line])  # else the kernel's launch in call()
    assert linked["prelude"] is not None and linked["prelude"]["end"] < line_of(Path(linked["generated_uri"]
                                                                               .removeprefix("file://")), "def triton_")



@pytest.mark.parametrize("workspace", ["pointwise", "cpu"], indirect=True)
async def test_inductor_kernel_reading_another_kernels_buffer_is_a_not_fused_diagnostic(gpu_client: LanguageClient,
                                                                                      workspace: Path):
    """ir_post_fusion.txt says op1 reads op0's buf0; on the GPU they became two Triton kernels (a why diagnostic on
    the slice's line), on the CPU one C++ kernel (none: the C++ backend fused them after writing that file)."""
    prog = workspace / "prog.py"
    slice_line = line_of(prog, "return z, (z[:, :256] * 3.0).exp()")
    text = await hover(gpu_client, prog, slice_line)  # answered after the index change's diagnostics went out
    not_fused = [d for d in gpu_client.diagnostics.get(prog.as_uri(), []) if d.code == "not-fused"]
    if "cuda" not in prog.read_text():
        assert text is not None and not_fused == [] and "ir_post_fusion.txt" not in text
        return
    (diagnostic,) = not_fused
    assert diagnostic.range.start.line == slice_line
    assert diagnostic.message == ("`exp` did not join `triton_poi_fused_add_mul_relu_sigmoid_0`'s kernel: reads its "
                                  "`buf0` from memory (ir_post_fusion.txt: `op0` iterates (1048576, 1), `op1` "
                                  "(262144, 1))")
    assert "**Why** (ir_post_fusion.txt):\n- not fused: `exp` (`triton_poi_fused_exp_mul_slice_1`) did not join" in text
