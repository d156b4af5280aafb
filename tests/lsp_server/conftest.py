"""Workspaces for the language-server tests: our compiler's fixture runs, and real Inductor runs generated
once per session with torch.compile (TORCH_COMPILE_DEBUG=1, default inductor backend, CPU)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import (INDUCTOR_SCRIPT, LENS_FOO1, OK_RUN, SERVER, InductorWorkspace, lens_workspace_with,
                            start_session)
from pytest_lsp import LanguageClient


@pytest.fixture
def lens_workspace(tmp_path: Path) -> Path:
    return lens_workspace_with(tmp_path, OK_RUN)


@pytest.fixture(scope="session")
def inductor_workspace(tmp_path_factory: pytest.TempPathFactory) -> InductorWorkspace:
    """A real `TORCH_COMPILE_DEBUG=1` run of two functions (cold compile: 10-30 s, once per session)."""
    workspace = tmp_path_factory.mktemp("inductor_ws")
    script = workspace / "model.py"
    script.write_text(INDUCTOR_SCRIPT)
    # A cache hit writes no graph folder: compile for real, into a private cache.
    env = dict(os.environ, TORCH_COMPILE_DEBUG="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TORCHINDUCTOR_CACHE_DIR=str(workspace / "inductor_cache"))
    done = subprocess.run([sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((workspace / "torch_compile_debug").glob("run_*/torchinductor/*/output_code.py"))
    return InductorWorkspace(workspace, script)


@pytest_lsp.fixture(config=SERVER)
async def lens_client(lsp_client: LanguageClient, lens_workspace: Path):
    await start_session(lsp_client, lens_workspace)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER)
async def inductor_client(lsp_client: LanguageClient, inductor_workspace: InductorWorkspace):
    await start_session(lsp_client, inductor_workspace.path)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="session")
def lens_compiled_workspace(tmp_path_factory: pytest.TempPathFactory) -> InductorWorkspace:
    """A real run of our `lens` backend (`LENS_DEBUG=1`) on the seed example foo1."""
    workspace = tmp_path_factory.mktemp("lens_ws")
    script = workspace / "foo1.py"
    script.write_text((LENS_FOO1 / "foo1.py").read_text())
    done = subprocess.run([sys.executable, str(script)], cwd=workspace, env=dict(os.environ, LENS_DEBUG="1"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((workspace / "torch_compile_debug").glob("run_*/lens/graph_*/kernel_map.json"))
    return InductorWorkspace(workspace, script)


@pytest_lsp.fixture(config=SERVER)
async def lens_compiled_client(lsp_client: LanguageClient, lens_compiled_workspace: InductorWorkspace):
    await start_session(lsp_client, lens_compiled_workspace.path)
    yield
    await lsp_client.shutdown_session()
