"""Issue 33 items 2 and 3 on a real Inductor C++ (CPU) run profiled with kernel times (tests/fixtures/
inductor_cpu_lines: `block` became cpp_fused_mul_sin_0, extern mm, cpp_fused_mul_relu_sigmoid_sum_1, with
vectorised loops and their tails, `mul` in two loops of one kernel; its `output_code.py -p` output kept by `kernel-lens profile-inductor`): linked lines both ways, checked against the
run's own provenance file, inlay hints with ms and share, line costs splitting a kernel's time, lines by cost."""
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

CPU_LINES = FIXTURES / "inductor_cpu_lines"
SIN_KERNEL, FUSED_KERNEL, MM = "cpp_fused_mul_sin_0", "cpp_fused_mul_relu_sigmoid_sum_1", "extern_kernels.mm"
READABLE_FILE = re.compile(r"# File: .*prog\.py:(?P<line>\d+) in")
READABLE_NODE = re.compile(r"^\s*(?P<node>\w+): \"")
PROFILER_ROW = re.compile(r"^\s*(?:graph_0_)?(?P<name>\S+)\s+(?P<percent>[\d.]+)%\s+(?P<ms>[\d.]+)(?P<unit>ms|s|us)\s")
SELF_CPU_TOTAL = re.compile(r"Self CPU time total: (?P<ms>[\d.]+)(?P<unit>ms|s|us)")
UNIT_MS = {"s": 1000.0, "ms": 1.0, "us": 0.001}
PROFILED_RUNS = 100  # output_code.py -p: times=10, repeat=10


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "ws", "block", CPU_LINES)


@pytest_lsp.fixture(config=SERVER)
async def cpu_client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


def graph_folder(workspace: Path) -> Path:
    (relative,) = json.loads((CPU_LINES / "paths.json").read_text())["programs"]["block"]
    return workspace / relative


def node_lines(folder: Path) -> dict[str, int]:
    """FX node -> its 1-based prog.py line, from fx_graph_readable.py's `# File:` comments."""
    found, line = {}, None
    for text in (folder / "fx_graph_readable.py").read_text().splitlines():
        if (mark := READABLE_FILE.search(text)) is not None:
            line = int(mark["line"])
        elif (node := READABLE_NODE.match(text)) is not None and line is not None:
            found[node["node"]] = line
    return found


def kernel_bodies(code: list[str]) -> dict[str, range]:
    """Kernel name -> its 0-based line range in output_code.py (`name = async_compile.cpp_pybinding(` to `''')`)."""
    bodies, start = {}, None
    for number, text in enumerate(code):
        if (opened := re.match(r"^(\w+) = async_compile\.cpp_pybinding\(", text)) is not None:
            name, start = opened[1], number
        elif text.startswith("''')") and start is not None:
            bodies[name], start = range(start, number + 1), None
    return bodies


def profiler_rows(folder: Path) -> dict[str, tuple[float, float]]:
    """Profiler row name -> (its share of the profiler's Self CPU total in %, its ms per profiled run) from
    benchmark_output.txt (100 profiled runs); the table's own Self CPU % column agrees to its rounding."""
    text = (folder / "benchmark_output.txt").read_text()
    total = SELF_CPU_TOTAL.search(text)
    total_ms = float(total["ms"]) * UNIT_MS[total["unit"]]
    rows = {}
    for line in text.splitlines():
        if (row := PROFILER_ROW.match(line)) is not None:
            ms = float(row["ms"]) * UNIT_MS[row["unit"]]
            assert abs(100 * ms / total_ms - float(row["percent"])) < 0.05, line
            rows[row["name"]] = (100 * ms / total_ms, ms / PROFILED_RUNS)
    return rows


async def command(client: LanguageClient, name: str, argument: dict):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(name, [argument]))


async def test_linked_lines_are_the_kernel_statements_of_each_lines_nodes(cpu_client: LanguageClient,
                                                                         workspace: Path):
    prog, folder = workspace / "prog.py", graph_folder(workspace)
    output_code = folder / "output_code.py"
    linked = await command(cpu_client, "kernelLens.linkedLines", {"uri": prog.as_uri()})
    assert linked["source_uri"] == prog.as_uri() and linked["generated_uri"] == output_code.as_uri()
    code = output_code.read_text().splitlines()
    links = {link["source_line"]: link["generated_lines"] for link in linked["links"]}
    user_lines = ["h = torch.sin(x) * 2.0", "y = h @ w", "z = torch.relu(y) * 1.5", "s = z.sum(dim=1)",
                  "return z, torch.sigmoid(s) * 2.0"]
    assert sorted(links) == [line_of(prog, text) for text in user_lines]
    assert [link["band"] for link in linked["links"]] == [0, 1, 2, 3, 4]
    text_of = {line: [code[n].strip() for n in numbers] for line, numbers in links.items()}
    vectorised_and_tail = 2
    assert text_of[line_of(prog, "h = torch.sin")] == [
        "auto tmp1 = tmp0.sin();", "auto tmp4 = tmp1 * tmp3;"] * vectorised_and_tail + [f"{SIN_KERNEL}(arg0_1, buf0)"]
    assert text_of[line_of(prog, "y = h @ w")] == ["extern_kernels.mm(buf0, arg1_1, out=buf1)"]
    assert text_of[line_of(prog, "z = torch.relu")] == ["auto tmp1 = at::vec::clamp_min(tmp0, decltype(tmp0)(0));",
                                                        "auto tmp4 = tmp1 * tmp3;"] * vectorised_and_tail + [
        f"{FUSED_KERNEL}(buf2, buf4)"]
    reduction = text_of[line_of(prog, "s = z.sum(dim=1)")]
    assert reduction[:3] == ["float tmp_acc0 = 0;", "at::vec::Vectorized<float> tmp_acc0_vec = "
                             "at::vec::Vectorized<float>(0);", "tmp_acc0_vec = tmp_acc0_vec + tmp0;"]
    assert reduction[3].startswith("tmp_acc0_vec = sum_masked_reduce(tmp_acc0_vec, tmp0, ")  # the tail's
    assert reduction[4].startswith("tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>(")
    assert text_of[line_of(prog, "return z, torch.sigmoid")] == [
        "auto tmp1 = decltype(tmp0)(1)/(decltype(tmp0)(1) + tmp0.neg().exp());",
        "auto tmp4 = tmp1 * tmp3;"] * vectorised_and_tail + [f"{FUSED_KERNEL}(buf2, buf4)"]
    # The fused kernel's loops follow its nodes: relu·mul, then the sum, then sigmoid·mul (the second mul).
    z_line, s_line, r_line = (links[line_of(prog, text)][:-1] for text in ("z = torch.relu", "s = z.sum",
                                                                           "return z, torch.sigmoid"))
    assert max(z_line) < min(s_line) and max(s_line) < min(r_line)
    # Every linked kernel statement lies in a kernel whose provenance (the run's own file) lists a node of that line.
    provenance = json.loads((folder / "inductor_provenance_tracking_node_mappings.json").read_text())["cppCodeToPost"]
    nodes_of = {key.split(":")[0]: nodes for key, nodes in provenance.items()}
    line_of_node, bodies = node_lines(folder), kernel_bodies(code)
    assert set(bodies) == {SIN_KERNEL, FUSED_KERNEL}
    checked = 0
    for source_line, numbers in links.items():
        for number in numbers:
            kernel = next((name for name, body in bodies.items() if number in body), None)
            if kernel is not None:
                assert source_line + 1 in {line_of_node[node] for node in nodes_of[kernel]}, (source_line, code[number])
                checked += 1
    assert checked == 17
    assert linked["prelude"] == {"start": 0, "end": bodies[SIN_KERNEL].start - 1}
    from_kernel = await command(cpu_client, "kernelLens.linkedLines", {"uri": output_code.as_uri()})
    assert from_kernel["links"] == linked["links"] and from_kernel["source_uri"] == prog.as_uri()


async def test_definition_from_a_cpp_statement_goes_to_its_fx_node(cpu_client: LanguageClient, workspace: Path):
    folder = graph_folder(workspace)
    output_code, readable = folder / "output_code.py", folder / "fx_graph_readable.py"
    statement = line_of(output_code, "auto tmp1 = decltype(tmp0)(1)/(")
    found = await cpu_client.text_document_definition_async(types.DefinitionParams(
        types.TextDocumentIdentifier(output_code.as_uri()), types.Position(statement, 30)))
    assert [(loc.uri, loc.range.start.line) for loc in found] == [
        (readable.as_uri(), line_of(readable, "torch.ops.aten.sigmoid.default"))]


async def test_inlay_hints_show_each_lines_share_and_ms(cpu_client: LanguageClient, workspace: Path):
    prog, rows = workspace / "prog.py", profiler_rows(graph_folder(workspace))
    hints = await cpu_client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(prog.as_uri()), types.Range(types.Position(0, 0), types.Position(20, 0))))
    labels = {hint.position.line: hint.label for hint in hints}
    sin_percent, sin_ms = rows[SIN_KERNEL]  # the profiler's own Self CPU % is the kernel's share
    assert labels[line_of(prog, "h = torch.sin")] == f"{sin_percent:.1f}% · {sin_ms:.3f} ms → {SIN_KERNEL}"
    mm_percent, mm_ms = rows["aten::mm"]
    assert labels[line_of(prog, "y = h @ w")] == f"{mm_percent:.1f}% · {mm_ms:.3f} ms → {MM}"
    fused_percent, fused_ms = rows[FUSED_KERNEL]  # split over the three lines it computes
    for text in ("z = torch.relu", "s = z.sum", "return z, torch.sigmoid"):
        assert labels[line_of(prog, text)] == (f"{fused_percent / 3:.1f}% · {fused_ms / 3:.3f} ms"
                                              f" → {FUSED_KERNEL}")


async def test_line_costs_split_each_kernels_time_over_its_lines(cpu_client: LanguageClient, workspace: Path):
    prog, rows = workspace / "prog.py", profiler_rows(graph_folder(workspace))
    costs = await command(cpu_client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    by_line = {entry["line"]: entry for entry in costs["lines"]}
    assert len(by_line) == 5
    assert [e["percent"] for e in costs["lines"]] == sorted((e["percent"] for e in costs["lines"]), reverse=True)
    for text in ("z = torch.relu", "s = z.sum", "return z, torch.sigmoid"):
        entry = by_line[line_of(prog, text)]
        (kernel,) = entry["kernels"]
        assert kernel["name"] == FUSED_KERNEL and kernel["lines_sharing"] == 3
        assert entry["ms"] == pytest.approx(rows[FUSED_KERNEL][1] / 3)
        assert entry["percent"] == pytest.approx(rows[FUSED_KERNEL][0] / 3, abs=0.01)
    (mm,) = by_line[line_of(prog, "y = h @ w")]["kernels"]
    assert mm["name"] == MM and mm["lines_sharing"] == 1 and mm["ms"] == pytest.approx(rows["aten::mm"][1])
    kernel_ms = sum(rows[name][1] for name in (SIN_KERNEL, FUSED_KERNEL, "aten::mm"))
    assert sum(entry["ms"] for entry in costs["lines"]) == pytest.approx(kernel_ms)
    assert sum(entry["percent"] for entry in costs["lines"]) <= 100.0


async def test_profile_lists_source_lines_by_cost(cpu_client: LanguageClient, workspace: Path):
    prog, rows = workspace / "prog.py", profiler_rows(graph_folder(workspace))
    profile = await command(cpu_client, "kernelLens.getProfile", {})
    (graph,) = profile["graphs"]
    total = SELF_CPU_TOTAL.search((graph_folder(workspace) / "benchmark_output.txt").read_text())
    assert graph["device"] == "cpu" and graph["profiled_ms"] == pytest.approx(
        float(total["ms"]) * UNIT_MS[total["unit"]] / PROFILED_RUNS)  # the profiler's Self CPU total, per run
    assert graph["compiled_ms"] < graph["profiled_ms"]  # this run's plain wall time: the shares are of the longer
    assert {k["name"]: k["percent"] for k in graph["kernels"]} == pytest.approx({
        name: rows[row][0] for name, row in ((SIN_KERNEL, SIN_KERNEL), (FUSED_KERNEL, FUSED_KERNEL), (MM, "aten::mm"))})
    lines = profile["lines"]
    assert [line["percent"] for line in lines] == sorted((line["percent"] for line in lines), reverse=True)
    by_code = {line["code"]: line for line in lines}
    assert set(by_code) == {"h = torch.sin(x) * 2.0", "y = h @ w", "z = torch.relu(y) * 1.5", "s = z.sum(dim=1)",
                            "return z, torch.sigmoid(s) * 2.0"}
    assert by_code["y = h @ w"]["kernels"] == [MM] and by_code["h = torch.sin(x) * 2.0"]["kernels"] == [SIN_KERNEL]
    assert all(line["uri"] == prog.as_uri() and line["line"] == line_of(prog, line["code"]) for line in lines)
