"""Helpers for the language-server tests: copying fixture runs into workspaces, starting LSP sessions."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LENS_FOO1 = FIXTURES / "lens_foo1"
PLACEHOLDER = "@FIXTURE_DIR@"
OK_RUN = "run_2026_01_02_10_00_00_000000-pid_200"
COMPILE_ERROR_RUN = "run_2026_01_01_09_00_00_000000-pid_100"
ACCURACY_RUN = "run_2026_01_01_09_30_00_000000-pid_150"
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server"])

INDUCTOR_SCRIPT = '''import torch


def foo1(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=1)
    return y


def mlp(x, w):
    h = x @ w
    h = torch.relu(h)
    s = h.sum(dim=1)
    return s * 2


if __name__ == "__main__":
    x1 = torch.randint(0, 255, (4, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 255, (4, 8), dtype=torch.uint8)
    torch.compile(foo1)(x1, x2)
    torch.compile(mlp)(torch.randn(16, 32), torch.randn(32, 8))
'''


def render_run(run_name: str, destination: Path, workspace: Path) -> Path:
    """Copy a fixture run to `destination`, its source paths pointing at `workspace`."""
    shutil.copytree(LENS_FOO1 / "runs" / run_name, destination)
    for path in destination.rglob("*"):
        if path.is_file():
            path.write_text(path.read_text().replace(PLACEHOLDER, str(workspace)))
    return destination


def copy_run(run_name: str, workspace: Path, source_workspace: Path | None = None) -> Path:
    """Copy one fixture run into `workspace/torch_compile_debug/` at once (as atomic writers do)."""
    target = workspace / "torch_compile_debug" / run_name
    staging = render_run(run_name, workspace / f".staging_{run_name}", source_workspace or workspace)
    target.parent.mkdir(exist_ok=True)
    os.replace(staging, target)
    return target


def lens_workspace_with(tmp_path: Path, *runs: str) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shutil.copy(LENS_FOO1 / "foo1.py", workspace / "foo1.py")
    for run in runs:
        copy_run(run, workspace)
    return workspace


@dataclass
class InductorWorkspace:
    path: Path
    script: Path


async def start_session(client: LanguageClient, workspace: Path, options: dict | None = None) -> None:
    uri = workspace.as_uri()
    client.refresh_requests = []
    for method in (types.WORKSPACE_CODE_LENS_REFRESH, types.WORKSPACE_INLAY_HINT_REFRESH):
        if method not in client.protocol.fm.features:
            client.feature(method)(lambda params, method=method: client.refresh_requests.append(method))
    await client.initialize_session(types.InitializeParams(
        capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
        root_uri=uri, workspace_folders=[types.WorkspaceFolder(uri, workspace.name)],
        initialization_options=options or {}))


GPU_FIXTURES = FIXTURES / "inductor_gpu"


async def diagnostics_of(client: LanguageClient, uri: str, code: str, tries: int = 50) -> list[types.Diagnostic]:
    """The diagnostics of `code` published for `uri`, waiting up to `tries` tenths of a second for them."""
    for _ in range(tries):
        found = [d for d in client.diagnostics.get(uri, []) if d.code == code]
        if found:
            return found
        await asyncio.sleep(0.1)
    return []


def gpu_workspace(destination: Path, program: str, fixtures: Path = GPU_FIXTURES) -> Path:
    """A copy of a committed real-Inductor program (prog.py, torch_compile_debug/, torch_trace/) whose
    absolute paths (the machine it ran on) point into `destination`."""
    import json
    from trace_workspaces import frame, records

    old_root = f"{json.loads((fixtures / 'paths.json').read_text())['original_root']}/{program}"
    shutil.copytree(fixtures / program, destination)
    for path in destination.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if old_root not in text:
            continue
        if path.suffix == ".log":  # re-framed: each payload's md5 follows its new text
            path.write_text("".join(frame([ln.replace(old_root, str(destination)) for ln in rec])
                                    for rec in records(text)))
        else:
            path.write_text(text.replace(old_root, str(destination)))
    return destination


def program_workspace(tmp_path_factory, name: str, program: str, *runs: tuple[list[str], dict[str, str]]) -> Path:
    """A fresh workspace whose prog.py is `program`, after each (argv, extra env) in `runs` ran in it
    (PROG in argv stands for prog.py's path); a run that fails fails the test with its output."""
    ws = tmp_path_factory.mktemp(name)
    (ws / "prog.py").write_text(program)
    for argv, env in runs:
        argv = [str(ws / "prog.py") if a == "PROG" else a for a in argv]
        done = subprocess.run(argv, cwd=ws, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return ws
