"""Issue 47 on a real 2-GPU job (tests/fixtures/inductor_gpu_ddp, from two H100s over NCCL): a compiled model
wrapped in DDP, rank 1 switching to a larger batch and recompiling. Each rank's debug dir is a run of its own,
and the ranks' divergence shows on the user's line that called the compiled module."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, diagnostics_of, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

DDP = FIXTURES / "inductor_gpu_ddp"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "ws", "ddp_train", DDP)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()



async def test_each_rank_is_a_run_with_its_graphs_and_kernels(client: LanguageClient, workspace: Path):
    facts = json.loads((DDP / "paths.json").read_text())
    runs = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))
    by_rank = {r["path"].split("/ws/")[1].split("/")[0]: r for r in runs if r["kind"] == "inductor"}
    assert sorted(by_rank) == ["rank_0", "rank_1"]
    for rank, graphs in facts["ranks"].items():
        assert by_rank[f"rank_{rank}"]["graphs"] == len(graphs)
        triton = sum((workspace / g / "output_code.py").read_text().count("= async_compile.triton(") for g in graphs)
        assert by_rank[f"rank_{rank}"]["kernels"] >= triton > 0
    assert len(facts["ranks"]["1"]) == 2 * len(facts["ranks"]["0"])  # rank 1 compiled every graph twice


async def test_rank_divergence_shows_on_the_users_call_of_the_compiled_module(client: LanguageClient, workspace: Path):
    prog = workspace / "prog.py"
    await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(prog.as_uri()),
                                                             types.Position(0, 0)))
    found = await diagnostics_of(client, prog.as_uri(), "rank-divergence")
    call = line_of(prog, "loss = F.cross_entropy(compiled(x), y)")
    messages = sorted(d.message for d in found if d.range.start.line == call)
    assert messages == ["Ranks diverge in inner: different graphs on ranks [1] than on [0]",
                        "Ranks diverge in inner: recompiles differ: ranks [1] vs [0]"]
    related = [r.message for d in found for r in d.related_information or []]
    assert "rank 0: recompiled 0×; rank 1: recompiled 1×" in related
    assert any("the compiled function `inner`" in m for m in related)
