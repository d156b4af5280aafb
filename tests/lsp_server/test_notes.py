"""notes.txt and why.json in the editor: why nodes run as ATen calls and why graphs run eagerly, from a real
run of our `lens` backend (LENS_DEBUG=1), shown as diagnostics, hover sections and code-lens counts."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, InductorWorkspace, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics

from lens_format.notes import GraphNotes

# `mixed`: the product is an ATen call (mm has no generated code by design), relu and mul a kernel.
# `grows`: compiled for (8, 4), then called with (9, 4): Dynamo recompiles with a symbolic size, which runs
# eagerly. `dynamic`: compiled dynamic from the first call, so it never had kernels. (The compiler compiles
# symbolic sizes now; the program refuses them the way it did before, so real eager graphs get written.)
PROGRAM = '''import torch
import compiler.pipeline
from compiler.lowering import EagerGraph

_lower = compiler.pipeline.lower_graph


def _refuse_symbolic_sizes(gm):
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in val.shape):
            raise EagerGraph(f"node {node.name} has symbolic sizes")
    return _lower(gm)


compiler.pipeline.lower_graph = _refuse_symbolic_sizes


def mixed(x, w):
    h = x @ w
    return torch.relu(h) * 2


def grows(x):
    a = x * 2
    return a.sum()


def dynamic(x):
    return (x + 1).sum()


if __name__ == "__main__":
    torch.compile(mixed, backend="lens")(torch.randn(8, 16), torch.randn(16, 4))
    g = torch.compile(grows, backend="lens")
    g(torch.randn(8, 4))
    g(torch.randn(9, 4))
    torch.compile(dynamic, backend="lens", dynamic=True)(torch.randn(5, 3))
'''
LINES = PROGRAM.splitlines()
MIXED_DEF, MM_LINE = LINES.index("def mixed(x, w):"), LINES.index("    h = x @ w")
GROWS_DEF, DYNAMIC_DEF = LINES.index("def grows(x):"), LINES.index("def dynamic(x):")


def test_parse_notes_reads_both_formats_and_keeps_other_lines():
    notes = GraphNotes.from_text(
        "mm: extern call to aten.mm.default (no lowering for aten.mm.default)\n"
        "addmm: extern call to aten.mm.default (addmm's bias is added in the kernels (2) that read it)\n"
        "tanh: extern call to aten.tanh.default\n"
        "graph_5 runs eagerly (no generated code): node arg0_1 has symbolic sizes\n"
        "something new: a future note\n\n# comment\n")
    assert [(n.node, n.target, n.reason, n.line) for n in notes.externs] == [
        ("mm", "aten.mm.default", "no lowering for aten.mm.default", 1),
        ("addmm", "aten.mm.default", "addmm's bias is added in the kernels (2) that read it", 2),
        ("tanh", "aten.tanh.default", "", 3)]
    assert (notes.eager.graph_id, notes.eager.reason, notes.eager.line) == ("graph_5",
                                                                           "node arg0_1 has symbolic sizes", 4)
    assert notes.other == ["something new: a future note"]
    assert notes.extern_for("tanh").target == "aten.tanh.default" and notes.extern_for("neg") is None
    assert GraphNotes.from_text("graph_1 runs eagerly: old text without the parenthesis").eager.reason == \
        "old text without the parenthesis"
    assert GraphNotes.from_text("\x00\xff: extern call to\n)(: runs eagerly").externs == []


@pytest.fixture(scope="session")
def notes_workspace(tmp_path_factory: pytest.TempPathFactory) -> InductorWorkspace:
    workspace = program_workspace(tmp_path_factory, "notes_ws", PROGRAM,
                                  ([sys.executable, "PROG"], {"LENS_DEBUG": "1"}))
    notes = sorted(workspace.glob("torch_compile_debug/run_*/lens/graph_*/notes.txt"))
    text = "".join(n.read_text() for n in notes)
    assert "mm: extern call to aten.mm.default" in text and "runs eagerly" in text, text
    return InductorWorkspace(workspace, workspace / "prog.py")


@pytest_lsp.fixture(config=SERVER)
async def notes_client(lsp_client: LanguageClient, notes_workspace: InductorWorkspace):
    await start_session(lsp_client, notes_workspace.path)
    yield
    await lsp_client.shutdown_session()


async def hover(client: LanguageClient, path: Path, line0: int) -> str:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(line0, 4)))
    assert result is not None
    return result.contents.value


async def test_notes_become_information_diagnostics_on_node_and_def_lines(notes_client: LanguageClient,
                                                                          notes_workspace: InductorWorkspace):
    uri = notes_workspace.script.as_uri()
    found = await wait_for_diagnostics(notes_client, uri, lambda ds: len([d for d in ds if d.code == "runs-eagerly"]) == 2)
    by_line = {(d.range.start.line, d.code): d for d in found}
    extern = by_line[(MM_LINE, "extern-call")]
    assert extern.severity == types.DiagnosticSeverity.Information
    assert extern.message == "`mm` runs as an ATen call (aten.mm.default): matrix products always call ATen's GEMM"
    for def_line in (GROWS_DEF, DYNAMIC_DEF):
        eager = by_line[(def_line, "runs-eagerly")]
        assert eager.severity == types.DiagnosticSeverity.Information
        assert re.fullmatch(r"runs eagerly \(no generated code\): node \w+ has symbolic sizes", eager.message)
    assert not [d for d in found if d.severity != types.DiagnosticSeverity.Information]


async def test_hover_says_the_newest_graph_runs_eagerly_not_only_the_older_kernels(
        notes_client: LanguageClient, notes_workspace: InductorWorkspace):
    text = await hover(notes_client, notes_workspace.script, GROWS_DEF)
    head = text.split("\n\n")[0]
    assert re.fullmatch(r"\*\*Kernel Lens\*\* — `grows` runs eagerly: its newest graph `graph_\d+` has no "
                        r"generated code \(node \w+ has symbolic sizes\)", head), head
    assert "An older graph compiled it into 1 kernel:" in text and "cpp_fused_mul_sum" in text
    assert "compiled into" not in head
    only_eager = await hover(notes_client, notes_workspace.script, DYNAMIC_DEF)
    assert "`dynamic` runs eagerly" in only_eager and "older graph" not in only_eager


async def test_hover_and_code_lens_count_native_and_aten_nodes(notes_client: LanguageClient,
                                                              notes_workspace: InductorWorkspace):
    text = await hover(notes_client, notes_workspace.script, MIXED_DEF)
    assert text.startswith(f"**Kernel Lens** — `mixed` compiled into 2 kernels (lines {MIXED_DEF + 2}-{MIXED_DEF + 3})"
                           " · 2 nodes native, 1 ATen")  # the lines of its body that became them (1-based)
    assert "**Not compiled** (notes.txt):" in text
    assert "- `mm` → ATen `aten.mm.default`: no lowering for aten.mm.default" in text
    line = await hover(notes_client, notes_workspace.script, MM_LINE)
    assert ("**Why** (why.json):\n- ATen call: `mm` runs as an ATen call (aten.mm.default): matrix products always "
            "call ATen's GEMM") in line
    lenses = await notes_client.text_document_code_lens_async(types.CodeLensParams(
        types.TextDocumentIdentifier(notes_workspace.script.as_uri())))
    titles = {(lens.range.start.line, lens.command.title) for lens in lenses}
    assert (MIXED_DEF, "2 nodes native, 1 ATen") in titles  # beside "2 kernels · <names>"
    assert any(line == MIXED_DEF and title.startswith("2 kernels · ") for line, title in titles)
    assert any(line == GROWS_DEF and re.fullmatch(r"runs eagerly: node \w+ has symbolic sizes", title)
               for line, title in titles)
    assert any(line == DYNAMIC_DEF and title.startswith("runs eagerly") for line, title in titles)


def test_index_report_lists_the_notes(notes_workspace: InductorWorkspace):
    done = subprocess.run([sys.executable, "-m", "lsp_server", "index", str(notes_workspace.path), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    graphs = [g for run in json.loads(done.stdout)["runs"] for g in run["graphs"]]
    eager = [g for g in graphs if g["status"] == "eager"]
    assert len(eager) == 2 and all("symbolic sizes" in g["notes"]["eager"] for g in eager)
    externs = [e for g in graphs for e in g["notes"]["externs"]]
    assert {"node": "mm", "target": "aten.mm.default", "reason": "no lowering for aten.mm.default"} in externs
