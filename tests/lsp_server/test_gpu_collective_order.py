"""Issue 47: ranks whose compiled graphs launch collectives in another order (they would hang, or reduce the wrong
tensors) are flagged. On the real 2-GPU DDP job none is: DDP all-reduces in its reducer, outside the compiled
graphs, so no graph's output code calls a collective on either rank. A copy whose logged output code calls
functional collectives (as FSDP2's graphs do) is flagged when one rank's order differs, and only then."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import frame, line_of, records

from lsp_server.parsers.torch_trace.reader import TraceReader
from lsp_server.parsers.torch_trace.summary import TraceSummary

DDP = FIXTURES / "inductor_gpu_ddp"
CALLS = {"all_reduce_": "torch.ops._c10d_functional.all_reduce_.default(buf0, 'sum', '0')",
         "all_gather_into_tensor": "buf1 = torch.ops._c10d_functional.all_gather_into_tensor.default(buf0, 2, '0')",
         "wait_tensor": "torch.ops._c10d_functional.wait_tensor.default(buf1)"}
ORDERS = {"same": (["all_reduce_", "all_gather_into_tensor"], ["all_reduce_", "all_gather_into_tensor"]),
          "swapped": (["all_reduce_", "all_gather_into_tensor"], ["all_gather_into_tensor", "all_reduce_"]),
          "real": None}


def with_collectives(log: Path, ops: list[str]) -> None:
    """Each logged output code calls `ops` (each followed by its wait) at the start of its `call`."""
    out = []
    for record in records(log.read_text()):
        if '"inductor_output_code"' in record[0]:
            at = next(n for n, line in enumerate(record) if re.match(r"\t\s*def call\(", line)) + 1
            record[at:at] = [f"\t        {CALLS[op]}" for name in ops for op in (name, "wait_tensor")]
        out.append(frame(record))
    log.write_text("".join(out))


@pytest.fixture
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    workspace = gpu_workspace(tmp_path / "ws", "ddp_train", DDP)
    orders = ORDERS[request.param]
    if orders is not None:
        for rank, ops in enumerate(orders):
            (log,) = (workspace / "torch_trace").glob(f"*rank_{rank}_*.log")
            with_collectives(log, ops)
    return workspace


def summary_of(workspace: Path) -> TraceSummary:
    summary = TraceSummary()
    for log in sorted((workspace / "torch_trace").glob("*.log")):
        summary.add(TraceReader(log).read_new())
    return summary


@pytest.mark.parametrize("workspace", ["real", "same", "swapped"], indirect=True)
def test_each_ranks_collectives_in_call_order(workspace: Path, request: pytest.FixtureRequest):
    orders = ORDERS[request.node.callspec.params["workspace"]]
    inner = {f.rank: f for f in summary_of(workspace).functions() if f.name == "inner"}
    assert sorted(inner) == [0, 1]
    for rank, function in inner.items():
        graphs = sum(len([g for g in fc.inductor_graphs if g.output_code]) for fc in function.latest_per_frame())
        assert graphs >= 2  # forward and backward of each frame
        assert function.collectives == (tuple(orders[rank]) * graphs if orders else ())


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def settled_divergences(client: LanguageClient, prog: Path, line: int, expected: list[str]) -> list:
    """The rank-divergence diagnostics on `line` once their messages are `expected` (the logs are read in
    batches: a rank read halfway can differ for a moment)."""
    found: list[types.Diagnostic] = []
    for _ in range(200):
        found = [d for d in client.diagnostics.get(prog.as_uri(), [])
                 if d.code == "rank-divergence" and d.range.start.line == line]
        if sorted(d.message for d in found) == expected:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"rank divergences never were {expected}: {sorted(d.message for d in found)}")


@pytest.mark.parametrize("workspace", ["real", "same", "swapped"], indirect=True)
async def test_a_different_collective_order_is_flagged_on_the_users_call(client: LanguageClient, workspace: Path,
                                                                         request: pytest.FixtureRequest):
    case = request.node.callspec.params["workspace"]
    prog = workspace / "prog.py"
    await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(prog.as_uri()),
                                                             types.Position(0, 0)))
    call = line_of(prog, "loss = F.cross_entropy(compiled(x), y)")
    order = "Ranks diverge in inner: collectives in another order on ranks [1] than on [0]"
    expected = sorted(["Ranks diverge in inner: different graphs on ranks [1] than on [0]",
                       "Ranks diverge in inner: recompiles differ: ranks [1] vs [0]"] + [order] * (case == "swapped"))
    found = await settled_divergences(client, prog, call, expected)
    if case == "swapped":
        (flag,) = [d for d in found if d.message == order]
        detail = next(r.message for r in flag.related_information if r.message.startswith("rank 0:"))
        rank0, rank1 = (part.split(": ", 1)[1].split(", ") for part in detail.split("; "))
        assert rank0[:2] == ["all_reduce_", "all_gather_into_tensor"] and rank1[:2] == rank0[1::-1]
        assert "wait_tensor" not in detail
