"""Issue 45 on real Inductor runs, through the real server. (1) "via calls" from Inductor's own records: the
committed CPU run `calls` (tests/fixtures/inductor_cpu_lines/calls) is an entry `run` that only calls a model
whose `forward` calls Gate twice and two Linear layers; its debug files keep each node's innermost frame only,
and the callers come from the kernel stack traces TORCH_COMPILE_DEBUG=1 logged to torch_compile_debug/tlparse/.
Without that log the entry's hover and lens say its calls were not recorded, never an empty total. (2) Nodes only
Inductor's post-grad graph has (the GPU softmax run's online-softmax decomposition) are in the node table with
their line in fx_graph_transformed.py and their source line: hover and go-to-definition find them."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, GPU_FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

CPU_LINES = FIXTURES / "inductor_cpu_lines"
MM, GATE_KERNEL, TAIL_KERNEL = "extern_kernels.addmm", "cpp_fused_mul_sigmoid_0", "cpp_fused__softmax_add_mul_sigmoid_tanh_1"
# The ground truth, read off prog.py: Gate.forward's line (7) is reached from Net.forward's `self.gate(h)` and
# `self.out_gate(h)` lines; `run`'s one line reaches every line of Net.forward that became a kernel.
GATE_LINE, FORWARD_LINES = 7, ("h = self.lin(x)", "h = self.proj(h)", "h = torch.tanh(h) + 1.0",
                               "return torch.softmax(self.out_gate(h), dim=-1)")


@pytest.fixture
def workspace(tmp_path: Path, request) -> Path:
    ws = gpu_workspace(tmp_path / "ws", "calls", CPU_LINES)
    if getattr(request, "param", "") == "no trace":
        shutil.rmtree(ws / "torch_compile_debug" / "tlparse")
    return ws


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def hover(client: LanguageClient, path: Path, line: int, character: int = 8) -> str:
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(path.as_uri()),
                                                                     types.Position(line - 1, character)))
    return "" if found is None else found.contents.value


PROFILE_TITLE = re.compile(r"^kernels [\d.]+ ms of [\d.]+ ms wall")  # the -p profile's lens (not asserted here)


async def lens_titles(client: LanguageClient, path: Path) -> dict[int, list[str]]:
    """1-based `def` line -> its lenses' titles, the profile's timing left out."""
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(path.as_uri())))
    titles: dict[int, list[str]] = {}
    for lens in lenses or []:
        if not PROFILE_TITLE.match(lens.command.title):
            titles.setdefault(lens.range.start.line + 1, []).append(lens.command.title)
    return titles


def via_block(text: str) -> tuple[str, list[str], list[int]]:
    """The hover's "Via calls" section: its heading, the kernels it lists and the callee lines it links."""
    block = text.split("**Via calls: ", 1)[1].split("\n\n", 1)[0]
    heading, _, items = block.partition("\n")
    kernels = [re.search(r"\[([\w.]+)\]", item)[1] for item in items.splitlines()]
    callees = [int(n) for n in re.findall(r"\[prog\.py:(\d+)\]", heading)]
    return heading.split("**", 1)[0], kernels, callees


async def test_the_entry_and_forward_show_what_their_calls_became_from_inductors_stack_records(client, workspace):
    prog = workspace / "prog.py"
    forward_lines = sorted(line_of(prog, text) + 1 for text in FORWARD_LINES)
    run_def, forward_def = line_of(prog, "def run") + 1, line_of(prog, "h = self.lin(x)")  # 1-based `def` lines
    count, kernels, callees = via_block(await hover(client, prog, run_def))
    assert count == "4 kernels"  # both Linear layers' addmm calls and the two C++ kernels, in call() order
    assert kernels == [MM, GATE_KERNEL, MM, TAIL_KERNEL]
    assert callees == sorted([GATE_LINE] + forward_lines)
    count, kernels, callees = via_block(await hover(client, prog, forward_def))
    assert (count, kernels, callees) == ("2 kernels", [GATE_KERNEL, TAIL_KERNEL], [GATE_LINE])
    titles = await lens_titles(client, prog)
    assert titles[run_def] == ["via calls: 4 kernels"]
    assert titles[forward_def] == [f"3 kernels · {MM}, {TAIL_KERNEL}", "via calls: 2 kernels"]
    assert titles[GATE_LINE - 1] == [f"2 kernels · {GATE_KERNEL}, {TAIL_KERNEL}"]
    assert line_of(prog, "torch.cos(x)") not in titles  # Unused.forward: never called
    gate_call = line_of(prog, "h = self.gate(h)") + 1  # the line itself: what its call became
    assert f"via calls: 1 kernel · {GATE_KERNEL} (from [prog.py:{GATE_LINE}]" in await hover(client, prog, gate_call)


@pytest.mark.parametrize("workspace", ["no trace"], indirect=True)
async def test_without_the_stack_records_the_calls_are_said_unrecorded(client, workspace):
    prog = workspace / "prog.py"
    run_def, forward_def = line_of(prog, "def run") + 1, line_of(prog, "h = self.lin(x)")
    text = await hover(client, prog, run_def)
    assert "**Via calls" not in text
    assert f"`run` calls: not recorded in this run — what its calls became is unknown (line {run_def + 1} became" in text
    assert "innermost frame" in text and "graph `model__0_inference_0.0`" in text
    text = await hover(client, prog, forward_def)
    assert f"`Net.forward` calls: not recorded in this run — what its calls became is unknown (line {forward_def + 2} " \
        "became no kernel of its own)" in text  # `h = self.gate(h)`
    assert "**Via calls" not in text
    gate_call = line_of(prog, "h = self.gate(h)") + 1
    assert (await hover(client, prog, gate_call)).startswith(
        f"**Kernel Lens** — line {gate_call}: what its call became is not recorded in this run. Inductor's")
    titles = await lens_titles(client, prog)
    assert titles[run_def] == ["via calls: not recorded in this run"]
    assert titles[forward_def] == [f"3 kernels · {MM}, {TAIL_KERNEL}", "via calls: not recorded in this run"]
    assert titles[GATE_LINE - 1] == [f"2 kernels · {GATE_KERNEL}, {TAIL_KERNEL}"]  # its lines call no user code


def test_a_trace_run_of_the_same_log_records_the_same_callers(workspace, tmp_path):
    """The log read as a trace run (its graphs written out of the records) gives each node the same stack."""
    from lsp_server.loading.trace_runs import TraceRunWriter
    from lsp_server.parsers.torch_trace.compiles import TraceLog
    from lsp_server.parsers.torch_trace.reader import TraceReader

    (path,) = (workspace / "torch_compile_debug" / "tlparse").glob("*.log")
    log = TraceLog(str(path))
    for record in TraceReader(str(path)).read_new():
        log.add(record)
    run, _ = TraceRunWriter(tmp_path / "cache").update(log)
    (graph,) = run.graphs
    assert graph.callers_recorded
    stacks = {name: [(f.function, f.line) for f in graph.nodes[name].frames]
              for name in ("addmm", "sigmoid", "sigmoid_1", "tanh", "permute")}
    assert stacks == {"addmm": [("run", 32), ("forward", 24)], "sigmoid": [("run", 32), ("forward", 25), ("forward", 7)],
                      "sigmoid_1": [("run", 32), ("forward", 28), ("forward", 7)],
                      "tanh": [("run", 32), ("forward", 27)],
                      "permute": [("forward", 24)]}  # in no kernel: no stack of its own


# The GPU softmax run's post-grad graph: softmax (line 4) and log_softmax (line 5) as online softmax; node →
# (its line in fx_graph_transformed.py, its source line). `exp_default` is read by no node: no source.
POST_GRAD_NODES = {
    "prepare_softmax_online_default_1": (4, 4), "getitem_2": (5, 4), "getitem_3": (6, 4), "sub_tensor_1": (7, 4),
    "exp_default_1": (8, 4), "prepare_softmax_online_default": (14, 5), "getitem": (15, 5), "getitem_1": (16, 5),
    "sub_tensor": (17, 5), "exp_default": (18, None),
}


@pytest.fixture
def softmax(tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "softmax", "softmax", GPU_FIXTURES)


def test_post_grad_only_nodes_are_in_the_node_table_with_their_lines(softmax):
    from lsp_server.loading.run_loader import find_run_dirs, load_run

    (run,) = [load_run(d) for d in find_run_dirs(softmax / "torch_compile_debug")]
    (graph,) = run.graphs
    transformed = (graph.path / "fx_graph_transformed.py").read_text().splitlines()
    found = {n.name: (n.readable_line, n.source.line if n.source else None) for n in graph.nodes.values()
             if n.graph_file == "fx_graph_transformed.py"}
    assert found == POST_GRAD_NODES
    assert all(transformed[line - 1].lstrip().startswith(f"{name}") for name, (line, _) in found.items())
    kernels = {k.name: k.nodes for k in graph.kernels}
    assert kernels["triton_per_fused__softmax_exp_prepare_softmax_online_sub_0"] == [
        "prepare_softmax_online_default_1", "div", "exp_default_1", "sub_tensor_1"]
    assert kernels["triton_red_fused_prepare_softmax_online_1"] == ["prepare_softmax_online_default"]


# The GPU training step's forward graph, whose folder has no fx_graph_transformed.py: its post-grad-only nodes come
# from the Triton kernels' `# Graph fragment:` comments; node -> its source line in prog.py (two blocks: qkv's bias
# add on line 24, the softmax on 29, proj's on 31, fc2's on 33; the loss's log_softmax on 60). The online softmax's
# first pass reads the scores and is read through tuple parts no record names: no source, not a guess.
FRAGMENT_NODES = {
    "add_tensor_5": 24, "sub_tensor_2": 29, "exp_default_2": 29, "add_tensor_4": 31, "add_tensor_1": 31,
    "add_tensor_3": 33, "add_tensor": 33, "sub_tensor": 60, "prepare_softmax_online_default_2": None,
    "prepare_softmax_online_default": None,
}


def test_post_grad_only_nodes_of_a_graph_without_its_post_grad_file_come_from_the_kernels_fragments(tmp_path):
    from lsp_server.loading.run_loader import find_run_dirs, load_run

    ws = gpu_workspace(tmp_path / "train", "transformer_train", FIXTURES / "inductor_gpu_train")
    (run,) = [load_run(d) for d in find_run_dirs(ws / "torch_compile_debug")]
    graph = next(g for g in run.graphs if g.id == "model__0_forward_1.0")
    assert not (graph.path / "fx_graph_transformed.py").exists()
    found = {n.name: n.source.line if n.source else None for n in graph.nodes.values()
             if n.graph_file == "fx_graph_transformed.py"}
    assert found == FRAGMENT_NODES
    assert all(graph.nodes[name].readable_line is None for name in found)  # in no graph file: no line to go to
    softmax = next(k for k in graph.kernels if k.name.startswith("triton_per_fused__softmax_div_exp"))
    assert {"prepare_softmax_online_default_2", "exp_default_2", "sub_tensor_2"} <= set(softmax.nodes)


@pytest_lsp.fixture(config=SERVER)
async def softmax_client(lsp_client: LanguageClient, softmax: Path):
    await start_session(lsp_client, softmax)
    yield
    await lsp_client.shutdown_session()


async def test_hover_and_definition_find_a_post_grad_only_node(softmax_client, softmax):
    (code,) = softmax.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py")
    transformed = code.parent / "fx_graph_transformed.py"
    kernel = "triton_red_fused_prepare_softmax_online_1"
    lines = code.read_text().splitlines()
    start = line_of(code, f"def {kernel}(")
    statement = next(n for n in range(start, len(lines)) if "tmp0 = tl.load(in_ptr0" in lines[n])  # 0-based
    text = await hover(softmax_client, code, statement + 1, 12)
    assert "FX node `prepare_softmax_online_default` = `prims.prepare_softmax_online.default`" in text
    assert f"fx_graph_transformed.py#L{POST_GRAD_NODES['prepare_softmax_online_default'][0]}" in text
    assert "prog.py:5" in text  # the log_softmax line
    found = await softmax_client.text_document_definition_async(types.DefinitionParams(
        types.TextDocumentIdentifier(code.as_uri()), types.Position(statement, 12)))
    assert [(loc.uri, loc.range.start.line + 1) for loc in found] == [
        (transformed.as_uri(), POST_GRAD_NODES["prepare_softmax_online_default"][0])]
