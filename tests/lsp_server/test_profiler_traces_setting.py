"""`kernelLens.profilerTraces` (issue 47): a torch.profiler trace kept outside the program's folder times the
GPU run's kernels when the setting names it (the file, or a folder holding it); without the setting, or with an
invalid value (a message says so), the run keeps the times of Inductor's own `-p` benchmark. A trace written,
replaced or deleted after the server started (named, or beside the program) times the run again."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

from lsp_server.features.describe import format_ms

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


# -- traces written, replaced or deleted after the server started (watched) -----------------------------------
@pytest.fixture
def held(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path, Path]:
    """(where the trace will be written: "named" folder or "beside" the program, workspace, the held trace)."""
    workspace, trace = moved_trace(tmp_path)
    held = Path(shutil.move(trace, tmp_path / trace.name))
    (tmp_path / "elsewhere" / "logs").rmdir()
    return request.param, workspace, held


@pytest_lsp.fixture(config=SERVER)
async def watching(lsp_client: LanguageClient, held: tuple[str, Path, Path], tmp_path: Path):
    await start_session(lsp_client, held[1], {"kernelLens": {"profilerTraces": [str(tmp_path / "elsewhere")]}})
    yield
    await lsp_client.shutdown_session()


async def poll(fetch, predicate, timeout: float = 60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        answer = await fetch()
        if predicate(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"never matched; last: {answer!r}"
        await asyncio.sleep(0.05)


async def forward_ms(client: LanguageClient) -> dict[str, float]:
    profile = await command(client, "kernelLens.getProfile")
    forward = next(g for g in profile["graphs"] if g["graph_id"] == "model__0_forward_1.0")
    return {k["name"]: k["total_ms"] for k in forward["kernels"] if k["name"].startswith("triton_")}


def matches(times: dict[str, float], totals: dict[str, float], steps: int, scale: float = 1.0) -> bool:
    return bool(times) and all(ms == pytest.approx(scale * totals[name] / steps / 1000) for name, ms in times.items())


async def softmax_hint(client: LanguageClient, workspace: Path) -> tuple[str, float]:
    """The softmax line's inlay hint label and its lineCosts milliseconds."""
    prog = workspace / "prog.py"
    line = line_of(prog, 'attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)')
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(prog.as_uri()), types.Range(types.Position(0, 0), types.Position(200, 0))))
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    return next(h.label for h in hints or [] if h.position.line == line), \
        next(e["ms"] for e in costs["lines"] if e["line"] == line)


def costs_first(label: str, ms: float) -> bool:
    """The hint starts with the line's cost, its ms lineCosts' (VS Code cuts a hint at 43 characters), then
    names its Triton kernels."""
    return re.fullmatch(rf"\d+\.\d% · {re.escape(format_ms(ms))} → triton_\w+.*", label) is not None


@pytest.mark.parametrize("held", ["named", "beside"], indirect=True)
async def test_a_trace_written_after_start_retimes_the_run(watching: LanguageClient, held: tuple[str, Path, Path],
                                                           tmp_path: Path):
    """Written (into the named folder, in a sub-folder created after start; or beside the program), the trace
    times the run; replaced by one whose kernels ran twice as long, the times double; deleted, -p's times
    come back. The softmax line's inlay hint follows each time (its ms: lineCosts' for the line)."""
    where, workspace, trace = held
    totals, steps = truth_us(trace)

    async def state() -> tuple[dict[str, float], str, float]:
        return (await forward_ms(watching), *(await softmax_hint(watching, workspace)))

    before, hint_before, _ = await state()
    assert not matches(before, totals, steps)
    folder = tmp_path / "elsewhere" / "logs" if where == "named" else workspace / "profiler_traces"
    folder.mkdir(parents=True)
    written = folder / trace.name
    shutil.copy(trace, written)
    _, label, ms = await poll(state, lambda s: matches(s[0], totals, steps) and costs_first(s[1], s[2]))
    assert label != hint_before, label
    data = json.loads(trace.read_text())
    for event in data["traceEvents"]:
        if event.get("cat") == "kernel":
            event["dur"] *= 2
    staged = folder / f".{trace.name}.tmp"
    staged.write_text(json.dumps(data))
    os.replace(staged, written)  # as atomic writers replace a file
    await poll(state, lambda s: matches(s[0], totals, steps, scale=2.0) and s[2] == pytest.approx(2 * ms)
               and costs_first(s[1], s[2]))
    written.unlink()
    await poll(state, lambda s: s[0] == before and s[1] == hint_before)
