"""End-to-end watcher tests: runs that appear, change, are half-written or deleted after the server started."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest_lsp
from lsp_workspaces import OK_RUN, SERVER, copy_run, lens_workspace_with, render_run, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

KERNEL = "cpp_fused_cat_maximum_neg_0"


async def hover_on_def(client: LanguageClient, workspace: Path) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((workspace / "foo1.py").as_uri()), types.Position(3, 4)))
    return None if result is None else result.contents.value


async def poll(fetch, predicate, timeout: float = 30.0):
    """`await fetch()` again until `predicate` accepts its answer, which it returns."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        answer = await fetch()
        if predicate(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"never matched; last: {answer!r}"
        await asyncio.sleep(0.02)


async def poll_hover(client: LanguageClient, workspace: Path, predicate, timeout: float = 30.0) -> str | None:
    return await poll(lambda: hover_on_def(client, workspace), predicate, timeout)


async def list_runs(client: LanguageClient) -> list[dict]:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))


@pytest_lsp.fixture(config=SERVER)
async def empty_client(lsp_client: LanguageClient, tmp_path: Path):
    """A workspace with the user's file but no torch_compile_debug/ yet."""
    await start_session(lsp_client, lens_workspace_with(tmp_path))
    yield
    await lsp_client.shutdown_session()


async def test_new_run_appears_in_hover_and_deleted_run_disappears(empty_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    assert await hover_on_def(empty_client, workspace) is None
    run = copy_run(OK_RUN, workspace)  # creates torch_compile_debug/ itself after the server started
    text = await poll_hover(empty_client, workspace, lambda t: t is not None)
    assert KERNEL in text
    shutil.rmtree(run)
    await poll_hover(empty_client, workspace, lambda t: t is None)


async def test_half_written_kernel_map_is_retried_not_fatal(empty_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    staged = render_run(OK_RUN, tmp_path / "staged", workspace)
    kernel_map = staged / "lens" / "graph_0" / "kernel_map.json"
    full = kernel_map.read_text()
    kernel_map.write_text(full[: len(full) // 2])  # as a non-atomic writer leaves it mid-write
    target = workspace / "torch_compile_debug" / OK_RUN
    target.parent.mkdir()
    os.replace(staged, target)  # the rest of the run lands whole: the watcher sees just this file broken
    # The watcher indexes the run with its broken file (no kernels) and keeps retrying; the server still answers.
    runs = await poll(lambda: list_runs(empty_client), lambda runs: bool(runs))
    assert [(r["id"], r["graphs"], r["kernels"]) for r in runs] == [(OK_RUN, 1, 0)]
    assert await hover_on_def(empty_client, workspace) is None
    (target / "lens" / "graph_0" / "kernel_map.json").write_text(full)
    text = await poll_hover(empty_client, workspace, lambda t: t is not None and KERNEL in t)
    assert "`foo1` compiled into 1 kernel" in text


@pytest_lsp.fixture(config=SERVER)
async def extra_root_client(lsp_client: LanguageClient, tmp_path: Path):
    workspace = lens_workspace_with(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    await start_session(lsp_client, workspace, {"kernelLens": {"debugRoots": [str(tmp_path / "elsewhere")]}})
    yield
    await lsp_client.shutdown_session()


async def test_debug_roots_setting_adds_a_watched_root(extra_root_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    copy_run(OK_RUN, tmp_path / "elsewhere", source_workspace=workspace)
    await poll_hover(extra_root_client, workspace, lambda t: t is not None and KERNEL in t)


@pytest_lsp.fixture(config=SERVER)
async def existing_root_client(lsp_client: LanguageClient, tmp_path: Path):
    """A workspace whose torch_compile_debug/ exists (empty) when the server starts."""
    workspace = lens_workspace_with(tmp_path)
    (workspace / "torch_compile_debug").mkdir()
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_a_run_in_a_root_that_existed_at_start_is_seen(existing_root_client: LanguageClient, tmp_path: Path):
    # The root is also a top-level folder of the workspace: its own watch and the workspace's watch of it are
    # one watchdog watch, which dropping the root's "duplicate" removed (runs after the first seconds were lost).
    workspace = tmp_path / "ws"
    await asyncio.sleep(2.0)  # past the settling rescan: only the watch can see the run now
    copy_run(OK_RUN, workspace)
    text = await poll_hover(existing_root_client, workspace, lambda t: t is not None, timeout=15.0)
    assert KERNEL in text
