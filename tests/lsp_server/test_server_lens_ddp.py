"""Issue 49 on a real 2-process gloo DDP job compiled by lens (tests/fixtures/lens_ddp): each rank's run folder is a
run named by its rank, a user line's hover names its rank's kernels and what the other rank made of the line, and
the function whose graphs differ between the ranks (rank 1 recompiled on its smaller last batch) gets a warning."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, PLACEHOLDER, SERVER, diagnostics_of, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

DDP = FIXTURES / "lens_ddp"
RANK0, RANK1 = "run_2026_02_01_10_00_00_001000-pid_301", "run_2026_02_01_10_00_00_000000-pid_302"
# line 17 (`h = torch.relu(self.a(x))`) on rank 0, as kernel_map.json maps its nodes: the forward's mm of `self.a`,
# its bias and relu, the relu's output read by the next layer's kernel; the backward's relu mask, `self.a`'s weight and
# bias gradients
RELU_LINE_KERNELS = ["extern_buf0_mm", "cpp_fused_addmm_relu_0", "cpp_fused__log_softmax_addmm_relu_1",
                     "cpp_fused_mm_threshold_backward_2", "extern_buf6_mm", "cpp_fused_sum_threshold_backward_3"]


def ddp_workspace(tmp_path: Path, runs: tuple[str, ...] = (RANK0, RANK1)) -> Path:
    """The fixture's program and run folders, their paths pointing at the workspace."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shutil.copy(DDP / "ddp_train.py", workspace / "ddp_train.py")
    for run in runs:
        target = workspace / "torch_compile_debug" / run
        shutil.copytree(DDP / "runs" / run, target)
        for path in target.rglob("*"):
            if path.is_file():
                path.write_text(path.read_text().replace(PLACEHOLDER, str(workspace)))
    return workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return ddp_workspace(tmp_path)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def execute(client: LanguageClient, command: str, *args):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command,
                                                                                   arguments=list(args)))


async def hover(client: LanguageClient, path: Path, line0: int) -> str:
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(path.as_uri()),
                                                                      types.Position(line0, 4)))
    assert found is not None
    return found.contents.value


def kernel_names(text: str) -> list[str]:
    """The kernels a line's hover lists, one section each: "`name` (kind, …)"."""
    return re.findall(r"^`(\w+)` \(", text, re.MULTILINE)


async def test_each_rank_is_a_run_named_by_its_rank_and_says_how_the_other_differs(client: LanguageClient):
    runs = await execute(client, "kernelLens.listRuns")
    assert [(r["id"], r["rank"], r["world_size"], r["rank_label"], r["graphs"], r["kernels"], r["diverges"])
            for r in runs] == [
        (RANK0, 0, 2, "rank 0 of 2", 2, 11, "rank 1 of 2: 4 graphs, rank 0 of 2: 2"),
        (RANK1, 1, 2, "rank 1 of 2", 4, 22, "rank 0 of 2: 2 graphs, rank 1 of 2: 4")]


async def test_a_line_names_its_ranks_kernels_and_what_the_other_rank_made_of_it(client: LanguageClient,
                                                                                  workspace: Path):
    program = workspace / "ddp_train.py"
    relu = line_of(program, "h = torch.relu(self.a(x))")
    text = await hover(client, program, relu)
    head, others = text.split("\n\n")[:2]
    assert head == f"**Kernel Lens** — line {relu + 1} became 6 kernels (rank 0 of 2)"
    assert others == "Other ranks — rank 1: 12 kernels in 4 graphs (rank 0: 6 in 2; rank 1 recompiled)"
    assert kernel_names(text) == RELU_LINE_KERNELS
    at = await execute(client, "kernelLens.kernelsAt", {"uri": program.as_uri(), "line": relu})
    assert [(k["name"], k["run_id"], k["rank_label"]) for k in at] == [(n, RANK0, "rank 0 of 2") for n in RELU_LINE_KERNELS]
    # the other rank answers once selected: each of rank 0's kernels twice (its first graphs and the recompiled ones)
    assert await execute(client, "kernelLens.selectRun", RANK1) == {"selected": RANK1}
    text = await hover(client, program, relu)
    head, others = text.split("\n\n")[:2]
    assert head == f"**Kernel Lens** — line {relu + 1} became 12 kernels (rank 1 of 2)"
    assert others == "Other ranks — rank 0: 6 kernels in 2 graphs (rank 1: 12 in 4; rank 1 recompiled)"
    assert sorted(kernel_names(text)) == sorted(RELU_LINE_KERNELS * 2)



async def test_the_function_whose_graphs_differ_between_ranks_is_flagged_on_its_def(client: LanguageClient,
                                                                                    workspace: Path):
    program = workspace / "ddp_train.py"
    await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(program.as_uri()),
                                                             types.Position(0, 0)))
    found = await diagnostics_of(client, program.as_uri(), "rank-divergence")
    relu, out = line_of(program, "h = torch.relu(self.a(x))"), line_of(program, "return torch.log_softmax(")
    assert [(d.range.start.line, d.severity, d.message) for d in found] == [
        (line_of(program, "def forward(self, x):"), types.DiagnosticSeverity.Warning,
         ("Ranks diverge in `forward`: rank 1 compiled it into 4 graphs, rank 0 into 2 (rank 1 recompiled); "
          f"different kernels on lines {relu + 1}, {out + 1}"))]
