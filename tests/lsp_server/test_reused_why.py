"""Duplicate-node folding (compiler/lowering/cse.py) in the editor, on a real run of our `lens` backend: each folded
node's line gets a `computed-once` diagnostic and a "computed once" hover line naming the node it reuses and that
node's statement; the kept node's line and a compile with LENS_FOLD_DUPLICATES=0 get none. Ground truth comes from
the run's own why.json and kernel_map.json, not from the server."""
from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from real_programs import line_of
from test_diagnostics import wait_for_diagnostics

# `waves` computes x.sin() on two lines; under autocast the LayerNorm's float32 output is cast to bfloat16 once per
# Linear that reads it (three identical casts).
PROGRAM = '''import torch
from torch import nn


class Qkv(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)

    def forward(self, x):
        h = self.norm(x)
        q = self.q(h)
        k = self.k(h)
        v = self.v(h)
        return q * k + v


def waves(x):
    a = x.sin()
    b = x.sin()
    return a * 2 + b


if __name__ == "__main__":
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(waves, backend="lens")(torch.randn(8, 16))
        with torch.autocast("cpu", torch.bfloat16):
            torch.compile(Qkv(), backend="lens")(torch.randn(4, 16))
'''
A, B, Q, K, V = (line_of(PROGRAM, t) for t in ("a = x.sin()", "b = x.sin()", "q = self.q(h)", "k = self.k(h)",
                                                 "v = self.v(h)"))  # 1-based
CODE = "computed-once"


@dataclass(frozen=True)
class Fold:
    """One `reused` record with the lines kernel_map.json gives its nodes."""

    graph: str
    folded: str
    kept: str
    folded_line: int
    kept_line: int
    kept_code: str
    kernel: str | None
    message: str


def folds_of(workspace: Path) -> list[Fold]:
    """Every `reused` record of the run, read straight from why.json and kernel_map.json."""
    found = []
    for why in sorted(workspace.glob("torch_compile_debug/run_*/lens/graph_*/why.json")):
        nodes = {n["name"]: n for n in json.loads((why.parent / "kernel_map.json").read_text())["nodes"]}
        for r in json.loads(why.read_text())["records"]:
            if r["kind"] == "reused":
                folded, kept = r["nodes"]
                assert r["reason"] == "duplicate"
                found.append(Fold(why.parent.name, folded, kept, nodes[folded]["source"]["line"],
                                  nodes[kept]["source"]["line"], nodes[kept]["source"]["code"], r["kernel"],
                                  r["message"]))
    return found


def kernel_nodes(workspace: Path) -> dict[str, list[str]]:
    """Each graph's nodes that some kernel computes (kernel_map.json)."""
    return {path.parent.name: [n for k in json.loads(path.read_text())["kernels"] for n in k["nodes"]]
            for path in workspace.glob("torch_compile_debug/run_*/lens/graph_*/kernel_map.json")}


def compile_in(tmp_path_factory, name: str, fold: str) -> Path:
    return program_workspace(tmp_path_factory, name, PROGRAM,
                             ([sys.executable, "PROG"], {"LENS_DEBUG": "1", "LENS_FOLD_DUPLICATES": fold}))


@pytest.fixture(scope="module")
def folded_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_in(tmp_path_factory, "reused_ws", "1")


@pytest.fixture(scope="module")
def unfolded_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_in(tmp_path_factory, "unfolded_ws", "0")


def test_ground_truth_the_run_folds_the_second_sin_and_the_two_later_casts(folded_workspace: Path):
    folds = folds_of(folded_workspace)
    assert sorted((f.folded_line, f.folded, f.kept_line, f.kept) for f in folds) == [
        (K, "_to_copy_1", Q, "_to_copy"), (V, "_to_copy_2", Q, "_to_copy"), (B, "sin_1", A, "sin")]
    kernels = kernel_nodes(folded_workspace)
    for f in folds:  # the folded node has no code of its own; the kept one's kernel computes it
        assert f.folded not in kernels[f.graph] and f.kept in kernels[f.graph] and f.kernel is not None
        assert f.message.startswith(f"computes what `{f.kept}` computes")


def test_without_folding_the_run_records_no_reuse(unfolded_workspace: Path):
    assert folds_of(unfolded_workspace) == []
    computed = {n for nodes in kernel_nodes(unfolded_workspace).values() for n in nodes}
    assert {"sin_1", "_to_copy_1", "_to_copy_2"} <= computed  # each duplicate has code of its own


async def started(client: LanguageClient, workspace: Path) -> str:
    await start_session(client, workspace)
    uri = (workspace / "prog.py").as_uri()
    # the addmm calls' extern-call diagnostics: the run's diagnostics are published (all of a file's at once)
    await wait_for_diagnostics(client, uri, lambda ds: any(d.code == "extern-call" for d in ds))
    return uri


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def expected_message(f: Fold) -> str:
    return f"{f.message}; `{f.kept}` is from `{f.kept_code}`"


async def hover_text(client: LanguageClient, uri: str, line: int) -> str:
    result = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                      types.Position(line - 1, 4)))
    return result.contents.value if result is not None else ""


async def test_each_folded_line_says_computed_once_and_names_what_it_reuses(client: LanguageClient,
                                                                             folded_workspace: Path):
    uri = await started(client, folded_workspace)
    folds = {f.folded_line: f for f in folds_of(folded_workspace)}
    found = sorted((d.range.start.line + 1, d.message) for d in client.diagnostics[uri] if d.code == CODE)
    assert found == sorted((line, f"`{f.folded}` {expected_message(f)}") for line, f in folds.items())
    assert all(d.severity == types.DiagnosticSeverity.Information for d in client.diagnostics[uri] if d.code == CODE)
    assert not [(u, d) for u, ds in client.diagnostics.items() if u != uri for d in ds if d.code == CODE]
    for line, f in folds.items():
        text = await hover_text(client, uri, line)
        assert f"- computed once: `{f.folded}` (`{f.kernel}`) {expected_message(f)}" in text, text
        assert text.count("computed once") == 1
    for line in (A, Q):  # the kept nodes' lines compute the value: nothing repeats there
        assert "computed once" not in await hover_text(client, uri, line)


async def test_a_compile_without_folding_says_nothing_computed_once(client: LanguageClient, unfolded_workspace: Path):
    uri = await started(client, unfolded_workspace)
    assert not [d for ds in client.diagnostics.values() for d in ds if d.code == CODE]
    for line in (B, K, V):
        assert "computed once" not in await hover_text(client, uri, line)


async def test_a_folded_node_without_a_line_shows_nowhere(client: LanguageClient, folded_workspace: Path,
                                                         tmp_path: Path):
    """The records do not say where `sin_1` is: the server does not put it on the kept `sin`'s line instead."""
    workspace = tmp_path / "ws"
    shutil.copytree(folded_workspace, workspace)
    for copied in workspace.glob("torch_compile_debug/**/*.*"):  # its paths point at the copy
        if copied.suffix in (".json", ".py", ".txt"):
            copied.write_text(copied.read_text().replace(str(folded_workspace), str(workspace)))
    (sin,) = [f for f in folds_of(workspace) if f.folded_line == B]
    path = next(workspace.glob(f"torch_compile_debug/run_*/lens/{sin.graph}/kernel_map.json"))
    data = json.loads(path.read_text())
    for node in data["nodes"]:
        if node["name"] == sin.folded:
            node["source"], node["callers"] = None, []
    path.write_text(json.dumps(data))
    readable = path.parent / "fx_graph_readable.py"  # its `# File:` comment, a blank line now (lines stay put)
    readable.write_text("\n".join("" if f"prog.py:{B} in waves" in t else t
                                  for t in readable.read_text().splitlines()) + "\n")
    uri = await started(client, workspace)
    assert sorted(d.range.start.line + 1 for d in client.diagnostics[uri] if d.code == CODE) == [K, V]
    for line in (A, B):
        assert "computed once" not in await hover_text(client, uri, line)
