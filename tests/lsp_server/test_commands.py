"""End-to-end `workspace/executeCommand` tests with the signatures the VS Code extension calls."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest_lsp
from lens_foo1_fixture import KERNEL, KERNEL_END, KERNEL_LOAD_X2_LINE, KERNEL_START, KERNEL_TIMED, PROFILED
from lsp_workspaces import ACCURACY_RUN, OK_RUN, SERVER, copy_run, lens_workspace_with, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient


async def execute(client: LanguageClient, command: str, *arguments):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments)))


async def test_list_and_select_runs(lens_client: LanguageClient, lens_workspace: Path):
    copy_run(ACCURACY_RUN, lens_workspace)
    assert await execute(lens_client, "kernelLens.reindex") == {"runs": 2}
    runs = await execute(lens_client, "kernelLens.listRuns")
    assert [(r["id"], r["kind"], r["graphs"], r["kernels"], r["selected"]) for r in runs] == [
        (OK_RUN, "lens", 1, 1, True), (ACCURACY_RUN, "lens", 1, 1, False)]
    assert runs[0]["time"] == "2026-01-02T10:00:00"
    assert runs[0]["path"] == str(lens_workspace / "torch_compile_debug" / OK_RUN)

    assert await execute(lens_client, "kernelLens.selectRun", ACCURACY_RUN) == {"selected": ACCURACY_RUN}
    runs = await execute(lens_client, "kernelLens.listRuns")
    assert [r["selected"] for r in runs] == [False, True]
    assert types.WORKSPACE_CODE_LENS_REFRESH in lens_client.refresh_requests
    # a rescan, or the watcher reading the selected run's folder again, keeps the user's choice
    assert await execute(lens_client, "kernelLens.reindex") == {"runs": 2}
    (lens_workspace / "torch_compile_debug" / ACCURACY_RUN / "lens" / "graph_0" / "notes.txt").write_text("")
    await asyncio.sleep(0.5)  # (the watcher's debounce; the selection must hold whether or not it has fired)
    assert [r["selected"] for r in await execute(lens_client, "kernelLens.listRuns")] == [False, True]
    # the selected (older) run now answers for foo1.py: it has no profile, so no time in kernelsAt
    kernels = await execute(lens_client, "kernelLens.kernelsAt", {"uri": (lens_workspace / "foo1.py").as_uri(), "line": 3})
    assert [(k["run_id"], k["time_ms"]) for k in kernels] == [(ACCURACY_RUN, None)]
    unknown = await execute(lens_client, "kernelLens.selectRun", "run_nope")
    assert unknown["selected"] is None and "unknown run" in unknown["error"]


async def test_kernels_at_def_and_source_line(lens_client: LanguageClient, lens_workspace: Path):
    uri = (lens_workspace / "foo1.py").as_uri()
    output_code = (lens_workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0" / "output_code.py").as_uri()
    on_def = await execute(lens_client, "kernelLens.kernelsAt", {"uri": uri, "line": 3})
    assert on_def == [{"name": KERNEL, "kind": "pointwise", "graph_id": "graph_0", "run_id": OK_RUN, "uri": output_code,
                       "start_line": KERNEL_START, "end_line": KERNEL_END, "line": KERNEL_START,
                       "time_ms": KERNEL_TIMED["total_ms"]}]
    on_max = await execute(lens_client, "kernelLens.kernelsAt", {"uri": uri, "line": 5})
    assert [(k["name"], k["line"]) for k in on_max] == [(KERNEL, KERNEL_LOAD_X2_LINE)]  # maximum's first line
    assert await execute(lens_client, "kernelLens.kernelsAt", {"uri": uri, "line": 0}) == []


async def test_get_profile(lens_client: LanguageClient, lens_workspace: Path):
    profile = await execute(lens_client, "kernelLens.getProfile", {"run_id": None})
    graph_dir = lens_workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0"
    lines = profile.pop("lines")  # the run's source lines by cost (test_linked_lines.py checks them)
    assert {line["line"] for line in lines} == {4, 5, 6}
    assert profile == {"run_id": OK_RUN, "graphs": [{
        "graph_id": "graph_0", "eager_ms": PROFILED["eager_ms"], "compiled_ms": PROFILED["compiled_ms"],
        "speedup": PROFILED["speedup"], "profiled_ms": PROFILED["profiled_ms"],
        "categories": [{"kind": "pointwise", "total_ms": PROFILED["categories"][0]["total_ms"],
                        "percent": PROFILED["categories"][0]["percent"]}],
        "kernels": [{"name": KERNEL, "kind": "pointwise", "calls": 1, "total_ms": KERNEL_TIMED["total_ms"],
                     "percent": KERNEL_TIMED["percent"], "uri": (graph_dir / "output_code.py").as_uri(), "line": KERNEL_START,
                     "source": {"uri": (lens_workspace / "foo1.py").as_uri(), "line": 4}}],
        "busy_percent": None, "device": "cpu"}]}
    assert await execute(lens_client, "kernelLens.getProfile", {"run_id": "run_nope"}) is None


@pytest_lsp.fixture(config=SERVER)
async def fake_compiler_client(lsp_client: LanguageClient, tmp_path: Path):
    """A workspace whose `compiler` package is a stand-in CLI (the process boundary): it prints, writes a
    run folder and exits 1, as the real CLI does when the user's program fails."""
    workspace = lens_workspace_with(tmp_path)
    (workspace / "compiler").mkdir()
    (workspace / "compiler" / "__init__.py").write_text("")
    (workspace / "compiler" / "__main__.py").write_text(
        "import sys, shutil\n"
        "print('compiling', sys.argv[1], sys.argv[2], flush=True)\n"
        "print('interpreter', sys.executable, flush=True)\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from lsp_workspaces import copy_run, OK_RUN\n"
        "from pathlib import Path\n"
        "copy_run(OK_RUN, Path.cwd())\n"
        "print('wrote run', flush=True)\n"
        "sys.exit(1)\n")
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_run_job_streams_output_and_reindexes(fake_compiler_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    assert await execute(fake_compiler_client, "kernelLens.listRuns") == []
    result = await execute(fake_compiler_client, "kernelLens.runJob",
                           {"kind": "compile", "uri": (workspace / "foo1.py").as_uri()})
    assert result["exit_code"] == 1
    assert f"compiling compile {workspace / 'foo1.py'}" in result["output_tail"]
    logged = [m.message for m in fake_compiler_client.log_messages]
    assert any("wrote run" in m for m in logged)
    assert [r["id"] for r in await execute(fake_compiler_client, "kernelLens.listRuns")] == [OK_RUN]
    assert fake_compiler_client.progress_reports  # work-done progress begin/report/end arrived
    bad = await execute(fake_compiler_client, "kernelLens.runJob", {"kind": "explode", "uri": (workspace / "foo1.py").as_uri()})
    assert bad["exit_code"] == 2 and "unknown job kind" in bad["output_tail"]
    assert f"interpreter {sys.executable}\n" in result["output_tail"]  # the server's interpreter (the same venv)
