"""`kernelLens.profilerTraces` (issue 47): a torch.profiler trace kept outside the program's folder times the
GPU run's kernels when the setting names it (the file, or a folder holding it); without the setting, or with an
invalid value (a message says so), the run keeps the times of Inductor's own `-p` benchmark."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

TRAIN = FIXTURES / "inductor_gpu_train"
SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_3"


def moved_trace(tmp_path: Path) -> tuple[Path, Path]:
    """The transformer_train workspace, its profiler trace moved to a folder outside it: (workspace, trace)."""
    workspace = gpu_workspace(tmp_path / "ws", "transformer_train", TRAIN)
    (trace,) = (workspace / "profiler_traces").glob("*.pt.trace.json")
    elsewhere = tmp_path / "elsewhere" / "logs"
    elsewhere.mkdir(parents=True)
    moved = Path(shutil.move(trace, elsewhere / trace.name))
    (workspace / "profiler_traces").rmdir()
    return workspace, moved


def truth_us(trace: Path) -> tuple[dict[str, float], int]:
    """Per Triton kernel name: µs over the whole trace; and the number of profiled steps."""
    events = json.loads(trace.read_text())["traceEvents"]
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    totals: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("triton_"):
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
    return totals, steps


def setting_for(kind: str, tmp_path: Path, trace: Path):
    return {"folder": [str(tmp_path / "elsewhere")], "file": [str(trace)], "relative": ["../elsewhere/logs"],
            "none": None, "invalid": str(trace)}[kind]


@pytest.fixture
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path, Path]:
    workspace, trace = moved_trace(tmp_path)
    return request.param, workspace, trace


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, case: tuple[str, Path, Path], tmp_path: Path):
    kind, workspace, trace = case
    value = setting_for(kind, tmp_path, trace)
    await start_session(lsp_client, workspace, {"kernelLens": {"profilerTraces": value}} if value is not None else {})
    yield
    await lsp_client.shutdown_session()


async def command(client: LanguageClient, name: str, argument: dict | None = None):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=name, arguments=[argument] if argument is not None else None))


async def softmax_line_kernels(client: LanguageClient, workspace: Path) -> dict[str, float]:
    prog = workspace / "prog.py"
    line = line_of(prog, 'attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)')
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    entry = next((e for e in costs["lines"] if e["line"] == line), {"kernels": []})
    return {k["name"]: k["ms"] for k in entry["kernels"] if k["graph_id"] == "model__0_forward_1.0"}


@pytest.mark.parametrize("case", ["folder", "file", "relative"], indirect=True)
async def test_named_trace_times_the_run(client: LanguageClient, case: tuple[str, Path, Path]):
    _, workspace, trace = case
    totals, steps = truth_us(trace)
    profile = await command(client, "kernelLens.getProfile")
    forward = next(g for g in profile["graphs"] if g["graph_id"] == "model__0_forward_1.0")
    assert forward["device"] == "cuda" and 0 < forward["busy_percent"] < 100
    timed = [k for k in forward["kernels"] if k["name"].startswith("triton_")]
    assert timed
    for kernel in timed:
        assert kernel["total_ms"] == pytest.approx(totals[kernel["name"]] / steps / 1000), kernel["name"]
    line = await softmax_line_kernels(client, workspace)  # the kernel's time, shared among its user lines
    total_ms = next(k["total_ms"] for k in forward["kernels"] if k["name"] == SOFTMAX)
    assert 0 < line[SOFTMAX] <= total_ms == pytest.approx(totals[SOFTMAX] / steps / 1000)


@pytest.mark.parametrize("case", ["none", "invalid"], indirect=True)
async def test_without_the_setting_the_moved_trace_is_not_read(client: LanguageClient, case: tuple[str, Path, Path]):
    kind, workspace, trace = case
    totals, steps = truth_us(trace)
    profile = await command(client, "kernelLens.getProfile")
    forward = next(g for g in profile["graphs"] if g["graph_id"] == "model__0_forward_1.0")
    for kernel in forward["kernels"]:
        if kernel["name"] in totals:
            assert kernel["total_ms"] != pytest.approx(totals[kernel["name"]] / steps / 1000), kernel["name"]
    line = await softmax_line_kernels(client, workspace)  # from -p's time of the kernel, shared as the trace's is
    total_ms = next(k["total_ms"] for k in forward["kernels"] if k["name"] == SOFTMAX)
    share = line[SOFTMAX] / total_ms
    assert 0 < share <= 1 and line[SOFTMAX] != pytest.approx(share * totals[SOFTMAX] / steps / 1000)
    messages = [m.message for m in client.messages]
    assert any("kernelLens.profilerTraces: invalid value" in m for m in messages) == (kind == "invalid")
