"""`kernel-lens profile-inductor` and the server's `kernelLens.profileInductor`: real Inductor's own
`python output_code.py -p`, its output kept as benchmark_output.txt where the server reads it (the committed
CPU run of tests/fixtures/inductor_gpu, its benchmark files removed first)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest_lsp
from lsp_workspaces import GPU_FIXTURES, LENS_FOO1, OK_RUN, SERVER, copy_run, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

REPO = Path(__file__).resolve().parents[2]
BENCHMARK_FILES = ("benchmark_output.txt", "benchmark_stderr.txt", "benchmark_trace.json")


def unprofiled_cpu_run(destination: Path) -> Path:
    workspace = gpu_workspace(destination, "pointwise", fixtures=GPU_FIXTURES / "cpu")
    for name in BENCHMARK_FILES:
        for path in workspace.glob(f"torch_compile_debug/run_*/torchinductor/*/{name}"):
            path.unlink()
    return workspace


def kernel_lens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_profile_inductor_writes_benchmark_output_beside_output_code(tmp_path: Path):
    workspace = unprofiled_cpu_run(tmp_path / "ws")
    (graph,) = workspace.glob("torch_compile_debug/run_*/torchinductor/*/")
    done = kernel_lens("profile-inductor", str(workspace / "torch_compile_debug"))
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    output = (graph / "benchmark_output.txt").read_text()
    assert "graph_0_cpp_fused_" in output and "Total wall time" in output  # the profiler's table, per kernel
    assert '"traceEvents"' in (graph / "benchmark_trace.json").read_text()
    assert f"wrote {graph / 'benchmark_output.txt'}" in done.stdout
    assert not list(graph.glob(".benchmark_*"))  # no temp file left behind
    missing = kernel_lens("profile-inductor", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert kernel_lens("profile-inductor", str(workspace / "prog.py")).returncode == 2


@pytest_lsp.fixture(config=SERVER)
async def unprofiled_client(lsp_client: LanguageClient, tmp_path: Path):
    workspace = unprofiled_cpu_run(tmp_path / "ws")
    (workspace / "lens_ws").mkdir()
    copy_run(OK_RUN, workspace / "lens_ws")  # one of our runs beside it (nested: found at any depth)
    (workspace / "lens_ws" / "foo1.py").write_text((LENS_FOO1 / "foo1.py").read_text())
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def execute(client: LanguageClient, command: str, *arguments):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, list(arguments)))


async def test_profile_inductor_command_profiles_the_run_of_the_open_file(unprofiled_client: LanguageClient,
                                                                          tmp_path: Path):
    workspace = tmp_path / "ws"
    runs = await execute(unprofiled_client, "kernelLens.listRuns")
    inductor = next(r for r in runs if r["kind"] == "inductor")
    assert await execute(unprofiled_client, "kernelLens.getProfile", {"run_id": inductor["id"]}) is None
    result = await execute(unprofiled_client, "kernelLens.profileInductor", {"uri": (workspace / "prog.py").as_uri()})
    assert result["exit_code"] == 0, result["output_tail"]
    assert "benchmark_output.txt" in result["output_tail"]
    profile = await execute(unprofiled_client, "kernelLens.getProfile", {"run_id": inductor["id"]})
    (graph,) = profile["graphs"]
    assert graph["device"] == "cpu" and graph["compiled_ms"] > 0
    assert [k["name"] for k in graph["kernels"]] == ["cpp_fused_add_exp_mul_relu_sigmoid_slice_0"]
    assert graph["kernels"][0]["total_ms"] > 0
    lens_run = next(r for r in runs if r["kind"] == "lens")
    refused = await execute(unprofiled_client, "kernelLens.profileInductor", {"run_id": lens_run["id"]})
    assert refused["exit_code"] == 2 and "kernel-lens profile SCRIPT" in refused["output_tail"]
