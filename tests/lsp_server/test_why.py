"""why.json and symbols.json in the editor, from a real run of our `lens` backend: the compiler's decisions as
information diagnostics and hover sections on the user's lines, the max_fusion_size quick fix, and dynamic
sizes on the function's hover and on a symbol in output_code.py."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, InductorWorkspace, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics

from lens_format.symbols import SymbolTable
from lens_format.why import WhyFile

# `chain`: five pointwise/reduction nodes under max_fusion_size = 2, so the scheduler refuses joins; argmax's
# loop stays scalar; mm is an ATen call. `scaled`: compiled with dynamic=True, so its graph has size symbols.
PROGRAM = '''import torch
import compiler

compiler.config.max_fusion_size = 2


def chain(x, w):
    a = torch.neg(x)
    b = a * 2 + 1
    c = b.amax(dim=1, keepdim=True)
    d = torch.mm(b - c, w)
    return d, x.argmax(dim=1)


def scaled(x):
    return (x * 2).sum(dim=1)


if __name__ == "__main__":
    torch.compile(chain, backend="lens")(torch.randn(8, 16), torch.randn(16, 4))
    torch.compile(scaled, backend="lens", dynamic=True)(torch.randn(8, 3))
'''
LINES = PROGRAM.splitlines()
AMAX, MM, ARGMAX = (LINES.index(t) for t in ("    c = b.amax(dim=1, keepdim=True)", "    d = torch.mm(b - c, w)",
                                            "    return d, x.argmax(dim=1)"))
SCALED_DEF = LINES.index("def scaled(x):")


def test_parse_why_keeps_known_fields_and_skips_malformed_records():
    parsed = WhyFile.from_json({"version": 1, "graph_id": "graph_3", "records": [
        {"kind": "not_fused", "nodes": ["add", 3], "kernel": "k", "reason": "max_fusion_size", "message": "m",
         "fix": {"title": "t", "setting": "max_fusion_size", "value": 128}, "related": ["mul"]},
        {"kind": "future_kind", "nodes": [], "message": "kept"}, {"kind": "aten_call"}, "junk",
        {"kind": "aten_call", "nodes": ["mm"], "message": "m2", "fix": {"title": "no setting"}}]})
    assert parsed.graph_id == "graph_3" and [r.kind for r in parsed.records] == ["not_fused", "future_kind",
                                                                                 "aten_call"]
    first = parsed.records[0]
    assert first.nodes == ("add",) and first.fix.setting == "max_fusion_size" and first.fix.value == 128
    assert first.related == ("mul",) and parsed.records[2].fix is None


def test_parse_symbols_describes_where_each_size_comes_from():
    (s0, s1, odd) = SymbolTable.from_json({"version": 1, "symbols": [
        {"name": "s0", "source": "L['x'].size()[0]", "range": [2, None], "hint": 8, "guards": ["Ne(s0, 1)"]},
        {"name": "s1", "source": "L['x'].size()[1]", "range": [2, 64], "hint": 3},
        {"name": "u0", "source": "", "range": "bad"}, {"source": "no name"}]}).symbols
    assert (s0.described, s0.range_text, s0.guards) == ("batch dimension of `x`", "[2, ∞)", ("Ne(s0, 1)",))
    assert (s1.described, s1.range_text) == ("dimension 1 of `x`", "[2, 64]")
    assert (odd.described, odd.range_text, odd.hint) == ("`u0`", "[-∞, ∞)", None)


@pytest.fixture(scope="session")
def why_workspace(tmp_path_factory: pytest.TempPathFactory) -> InductorWorkspace:
    workspace = program_workspace(tmp_path_factory, "why_ws", PROGRAM, ([sys.executable, "PROG"], {"LENS_DEBUG": "1"}))
    assert list(workspace.glob("torch_compile_debug/run_*/lens/graph_*/symbols.json"))
    return InductorWorkspace(workspace, workspace / "prog.py")


@pytest_lsp.fixture(config=SERVER)
async def why_client(lsp_client: LanguageClient, why_workspace: InductorWorkspace):
    await start_session(lsp_client, why_workspace.path)
    yield
    await lsp_client.shutdown_session()


async def hover(client: LanguageClient, path: Path, line0: int, character: int = 4) -> str:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(line0, character)))
    assert result is not None
    return result.contents.value


async def test_decisions_are_information_diagnostics_on_their_lines(why_client: LanguageClient,
                                                                    why_workspace: InductorWorkspace):
    uri = why_workspace.script.as_uri()
    found = await wait_for_diagnostics(why_client, uri, lambda ds: any(d.code == "not-vectorized" for d in ds))
    by_code = {}
    for d in found:
        by_code.setdefault(d.code, []).append(d)
        assert d.severity == types.DiagnosticSeverity.Information and d.source == "kernel-lens"
    assert any(d.range.start.line == MM and "matrix products always call ATen's GEMM" in d.message
               for d in by_code["extern-call"])
    assert any(d.range.start.line == AMAX and re.search(r"did not join `\w+`'s kernel: together they would be \d "
                                                        r"nodes, over compiler.config.max_fusion_size = 2", d.message)
               for d in by_code["not-fused"])
    assert any(d.range.start.line == ARGMAX and "argmax loop runs scalar" in d.message
               for d in by_code["not-vectorized"])


async def test_hover_explains_the_line_and_the_quick_fix_sets_max_fusion_size(why_client: LanguageClient,
                                                                              why_workspace: InductorWorkspace):
    text = await hover(why_client, why_workspace.script, AMAX)
    assert re.search(r"\*\*Why\*\* \((vectorization.txt, )?why.json\):", text) and "- not fused: `amax`" in text
    assert "quick fix: *Set compiler.config.max_fusion_size = 4*" in text
    uri = why_workspace.script.as_uri()
    at = types.Range(types.Position(AMAX, 0), types.Position(AMAX, 0))
    actions = await why_client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), at, types.CodeActionContext(diagnostics=[])))
    (action,) = [a for a in actions if a.title == "Set compiler.config.max_fusion_size = 4"]
    (edit,) = action.edit.changes[uri]
    setting = LINES.index("compiler.config.max_fusion_size = 2")  # the file sets it: that line changes
    assert edit.new_text == "compiler.config.max_fusion_size = 4"
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character) == (
        setting, 0, setting, len(LINES[setting]))


async def test_dynamic_sizes_on_the_function_and_on_a_symbol_in_output_code(why_client: LanguageClient,
                                                                            why_workspace: InductorWorkspace):
    text = await hover(why_client, why_workspace.script, SCALED_DEF)
    found = re.search(r"\n- batch dimension of `x` is dynamic: `(s\d+)` ∈ \[2, ∞\) \(traced with 8\)", text)
    assert "**Dynamic shapes** (symbols.json):\n" in text and found, text
    assert re.search(r"\n- dimension 1 of `x` is dynamic: `s\d+` ∈ \[2, ∞\) \(traced with 3\)", text)
    symbol = found.group(1)
    for code in why_workspace.path.glob("torch_compile_debug/run_*/lens/graph_*/output_code.py"):
        lines = code.read_text().splitlines()
        at = next((n for n, t in enumerate(lines) if re.search(rf"\b{symbol}\b", t) and "extern" not in t), None)
        if at is not None and (code.parent / "symbols.json").is_file():
            break
    else:
        pytest.fail(f"no output_code.py names {symbol}")
    column = re.search(rf"\b{symbol}\b", lines[at]).start() + 1
    text = await hover(why_client, code, at, column)
    assert text.startswith(f"**Kernel Lens** — size symbol `{symbol}`: batch dimension of `x` is dynamic"), text
    assert f"read by Dynamo at `L['x'].size()[0]`" in text


async def test_settings_in_force_on_the_hover_and_in_the_compiles_picker(why_client: LanguageClient,
                                                                         why_workspace: InductorWorkspace):
    """why.json's config: the compiler.config settings not at their default when the graph was compiled."""
    chain_def = LINES.index("def chain(x, w):")
    text = await hover(why_client, why_workspace.script, chain_def)
    assert "**Settings in force** (why.json):\n- `compiler.config.max_fusion_size = 2`" in text, text
    compiles = await why_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.listCompiles", arguments=[{"uri": why_workspace.script.as_uri()}]))
    chain = [c for c in compiles if c["function"] == "chain"]
    assert chain and all(c["origin"].startswith("debug directory") for c in chain)
    assert chain[0]["config"] == {"compiler.config.max_fusion_size": 2} and chain[0]["def_line"] == chain_def
    wrapped = LINES.index('    torch.compile(chain, backend="lens")(torch.randn(8, 16), torch.randn(16, 4))')
    assert chain[0]["compile_call"] == {"uri": why_workspace.script.as_uri(), "line": wrapped}
