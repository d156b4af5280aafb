"""Debug and trace folders below the workspace root: a script run from a sub-folder (or a monorepo package)
writes `torch_compile_debug/` there. Found at any depth at start, by `index DIR`, and live by the watcher."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest_lsp
from lsp_workspaces import LENS_FOO1, OK_RUN, SERVER, render_run, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics
from trace_workspaces import line_of, trace_workspace

from lsp_server.loading.discovery import discover

KERNEL = "cpp_fused_cat_maximum_neg_0"
REPO = Path(__file__).resolve().parents[2]


def nested_run(project: Path, run: str = OK_RUN) -> Path:
    """`project/foo1.py` and its run in `project/torch_compile_debug/`, put in place by one rename."""
    project.mkdir(parents=True, exist_ok=True)
    shutil.copy(LENS_FOO1 / "foo1.py", project / "foo1.py")
    staged = render_run(run, project.parent / f".staging_{project.name}", project)
    (staged.parent / f".debug_{project.name}").mkdir()
    os.replace(staged, staged.parent / f".debug_{project.name}" / run)
    os.replace(staged.parent / f".debug_{project.name}", project / "torch_compile_debug")
    return project / "torch_compile_debug"


def test_discover_finds_debug_and_trace_folders_at_any_depth_and_skips_dependency_trees(tmp_path: Path):
    wanted = [tmp_path / "torch_compile_debug", tmp_path / "a" / "b" / "c" / "torch_compile_debug",
              tmp_path / "pkg" / "torch_compile_debug"]
    for folder in wanted + [tmp_path / "a" / "torch_trace"]:
        (folder / "run_x").mkdir(parents=True)
    (tmp_path / "a" / "torch_compile_debug_not").mkdir()
    for skipped in (".git", "web/node_modules/x", "env/lib/python3.11/site-packages/p", "src/__pycache__",
                    ".hidden", "myvenv/lib", "condaenv/sub"):
        (tmp_path / skipped / "torch_compile_debug").mkdir(parents=True)
    (tmp_path / "myvenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "condaenv" / "conda-meta").mkdir()
    (tmp_path / "pkg" / "torch_compile_debug" / "run_x" / "torch_compile_debug").mkdir()  # not walked into
    found = discover(tmp_path)
    assert found.debug_dirs == sorted(wanted)
    assert found.trace_dirs == [tmp_path / "a" / "torch_trace"]
    assert not found.truncated


def test_discover_stops_after_its_folder_budget(tmp_path: Path):
    for i in range(30):
        (tmp_path / f"d{i:02d}" / "deeper").mkdir(parents=True)
    (tmp_path / "d29" / "deeper" / "torch_compile_debug").mkdir()
    assert discover(tmp_path).debug_dirs == [tmp_path / "d29" / "deeper" / "torch_compile_debug"]
    limited = discover(tmp_path, max_dirs=10)
    assert limited.truncated and limited.listed == 10 and limited.debug_dirs == []


def test_index_cli_lists_runs_of_every_sub_folder(tmp_path: Path):
    nested_run(tmp_path / "one")
    nested_run(tmp_path / "two" / "deep", "run_2026_01_01_09_00_00_000000-pid_100")
    for argv in ([sys.executable, "-m", "lsp_server", "index", str(tmp_path)],
                 [sys.executable, "-m", "kernel_lens", "index", str(tmp_path)]):
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "no runs" not in done.stdout
        assert OK_RUN in done.stdout and "run_2026_01_01_09_00_00_000000-pid_100" in done.stdout


async def hover_on_def(client: LanguageClient, script: Path) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(script.as_uri()), types.Position(3, 4)))
    return None if result is None else result.contents.value


async def poll_hover(client: LanguageClient, script: Path, timeout: float = 30.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        text = await hover_on_def(client, script)
        if text is not None and KERNEL in text:
            return text
        assert asyncio.get_running_loop().time() < deadline, f"hover never showed the kernel; last: {text!r}"
        await asyncio.sleep(0.05)


@pytest_lsp.fixture(config=SERVER)
async def nested_client(lsp_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    nested_run(workspace / "packages" / "model")
    (workspace / "existing" / "sub").mkdir(parents=True)
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_server_indexes_a_nested_debug_folder_and_sees_new_ones_at_any_depth(nested_client: LanguageClient,
                                                                                  tmp_path: Path):
    workspace = tmp_path / "ws"
    text = await poll_hover(nested_client, workspace / "packages" / "model" / "foo1.py")
    assert "`foo1` compiled into 1 kernel" in text
    # a folder that existed at start, three levels down; then a top-level folder made after start
    for project in (workspace / "existing" / "sub" / "x", workspace / "later" / "a" / "b"):
        nested_run(project)
        await poll_hover(nested_client, project / "foo1.py")
    runs = await nested_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.listRuns"))
    assert len(runs) == 3


async def test_debug_folder_in_a_skipped_tree_is_ignored(nested_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    await poll_hover(nested_client, workspace / "packages" / "model" / "foo1.py")
    nested_run(workspace / "node_modules" / "pkg")
    nested_run(workspace / "packages" / "model" / "node_modules" / "dep")
    nested_run(workspace / "existing" / "sub" / "ok")  # the change that is seen after them
    await poll_hover(nested_client, workspace / "existing" / "sub" / "ok" / "foo1.py")
    runs = await nested_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.listRuns"))
    assert sorted(r["path"] for r in runs) == sorted(str(p / "torch_compile_debug" / OK_RUN) for p in (
        workspace / "packages" / "model", workspace / "existing" / "sub" / "ok"))


@pytest_lsp.fixture(config=SERVER)
async def empty_trace_client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "ws" / "services").mkdir(parents=True)
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def test_nested_trace_folder_made_after_start_gets_its_graph_break_diagnostic(
        empty_trace_client: LanguageClient, tmp_path: Path):
    project = tmp_path / "ws" / "services" / "train"
    staged = trace_workspace(project, "breaks_recompile_failure", log_folder=".logs")  # hidden: not looked at
    script = project / "breaks_recompile_failure.py"
    os.replace(staged, project / "torch_trace")
    found = await wait_for_diagnostics(empty_trace_client, script.as_uri(),
                                       lambda d: [x for x in d if x.code == "graph-break"])
    assert any(d.range.start.line == line_of(script, "if b.sum() < 0") for d in found if d.code == "graph-break")
