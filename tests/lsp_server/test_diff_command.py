"""`kernelLens.diffRuns` end to end: two real lens runs of one script (max_fusion_size 64 vs 2) -> the
server runs `kernel-lens diff --json` and answers with the split kernels and where each one lives."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

PROGRAM = '''import torch


def f(x, y):
    return (x + y) * 2 + 1


torch.compile(f, backend="lens")(torch.randn(64, 32), torch.randn(64, 32))
'''


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compile_prog = [sys.executable, "-m", "compiler", "compile", "PROG"]
    runs = [(compile_prog, {"LENS_MAX_FUSION_SIZE": size}) for size in ("64", "2")]
    ws = program_workspace(tmp_path_factory, "diff_ws", PROGRAM, *runs)
    assert len(list((ws / "torch_compile_debug").glob("run_*/lens/graph_0"))) == 2
    return ws


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, two_runs: Path):
    await start_session(lsp_client, two_runs)
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_diff_runs_names_the_kernels_that_split(client: LanguageClient):
    runs = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("kernelLens.listRuns", []))
    lens_runs = sorted((r for r in runs if r["kind"] == "lens"), key=lambda r: r["time"])
    assert len(lens_runs) == 2
    old, new = lens_runs[0]["id"], lens_runs[1]["id"]
    report = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("kernelLens.diffRuns", [{"a": old, "b": new}]))
    assert "error" not in report, report
    assert report["changed"] is True and report["a_run"] == old and report["b_run"] == new
    kernels = [k for g in report["graphs"] for k in g["kernels"]]
    split = next(k for k in kernels if k["change"] == "split")
    assert len(split["a"]) == 1 and len(split["b"]) >= 2
    assert [loc["name"] for loc in split["a_locations"]] == split["a"]
    assert sorted(loc["name"] for loc in split["b_locations"]) == sorted(split["b"])
    for loc in split["a_locations"] + split["b_locations"]:
        assert loc["uri"].endswith("output_code.py") and loc["end_line"] > loc["start_line"] >= 0


async def test_diff_runs_rejects_unknown_runs(client: LanguageClient):
    report = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("kernelLens.diffRuns", [{"a": "nope", "b": "nada"}]))
    assert "unknown run" in report["error"]
