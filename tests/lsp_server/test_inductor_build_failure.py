"""Real Inductor C++ build failures after a plain `TORCH_COMPILE_DEBUG=1 python x.py` (no `kernel-lens compile`):
the error is read from the run's own structured trace (torch_compile_debug/tlparse/*.log) and mapped through
the failing C++ statement to its FX node and the user's line."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, InductorWorkspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics

from lsp_server.loading.cpp_statements import kernel_statements, statement_node
from lsp_server.loading.run_loader import find_run_dirs, load_run
from lsp_server.parsers.inductor_build_failure import parse_gxx_output

BAD_TANH = (Path(__file__).resolve().parents[1] / "fixtures" / "inductor_cpu_error" / "bad_tanh.py").read_text()
LINES = BAD_TANH.splitlines()
MUL_LINE, TANH_LINE = LINES.index("    a = x * 2"), LINES.index("    b = torch.tanh(a)")  # 0-based


@pytest.fixture(scope="session")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> InductorWorkspace:
    workspace = tmp_path_factory.mktemp("inductor_build_failure")
    script = workspace / "x.py"
    script.write_text(BAD_TANH)
    env = dict(os.environ, TORCH_COMPILE_DEBUG="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TORCHINDUCTOR_CACHE_DIR=str(workspace / "inductor_cache"))
    env.pop("TORCH_TRACE", None)
    done = subprocess.run([sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode != 0 and "CppCompileError" in done.stderr, done.stderr[-3000:]
    assert list((workspace / "torch_compile_debug" / "tlparse").glob("*.log"))
    assert not list(workspace.glob("torch_compile_debug/**/compile_error.json"))  # nothing but the trace says it
    return InductorWorkspace(workspace, script)


def test_gxx_output_with_echoed_source_lines():
    text = ("CppCompileError: C++ compile error\n\nCommand:\ng++ /c/x.cpp -o x.so\n\nOutput:\n"
            "/c/x.cpp: In function ‘void kernel(const float*, float*)’:\n"
            "/c/x.cpp:17:33: error: ‘bad_tanh’ was not declared in this scope; did you mean ‘atanh’?\n"
            "   17 |                     auto tmp3 = bad_tanh(tmp2);\n"
            "      |                                 ^~~~~~~~\n"
            "/c/x.cpp:20:1: note: something\n/c/x.cpp:5:1: fatal error: x.h: No such file\n")
    found = parse_gxx_output(text)
    assert [(d.line, d.column, d.severity, d.code) for d in found] == [
        (17, 33, "error", "                    auto tmp3 = bad_tanh(tmp2);"), (20, 1, "note", ""), (5, 1, "error", "")]


def test_statement_between_its_anchored_neighbours_is_the_middle_node():
    lines = ["{", "auto tmp0 = in_ptr0[x0];", "auto tmp1 = static_cast<float>(2.0);", "auto tmp2 = float(tmp0 * tmp1);",
             "auto tmp3 = bad_tanh(tmp2);", "auto tmp4 = static_cast<float>(1.0);", "auto tmp5 = float(tmp3 + tmp4);",
             "out_ptr0[x0] = tmp5;", "}"]
    nodes = [("mul", "mul"), ("tanh", "tanh"), ("add", "add")]
    statements, at = kernel_statements(lines, 4)
    assert statement_node(statements, at, nodes) == "tanh"
    statements, at = kernel_statements(lines, 6)
    assert statement_node(statements, at, nodes) == "add"
    # a vectorised body then its scalar tail: the tail's tmp0.. run is aligned on its own
    tail = ["auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + x0, 16);", "auto tmp1 = tmp0 * tmp0;",
            "auto tmp2 = tmp1.exp();", "auto tmp0 = in_ptr0[x0];", "auto tmp1 = tmp0 * tmp0;",
            "auto tmp2 = broken(tmp1);"]
    statements, at = kernel_statements(tail, 5)
    assert (len(statements), at) == (3, 2)
    assert statement_node(statements, at, [("mul", "mul"), ("exp", "exp")]) == "exp"
    # Inductor's vectorised form (torch 2.13): the load's index arithmetic is not a node's `add`
    vector = ["auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), 16);",
              "auto tmp1 = static_cast<float>(2.0);", "auto tmp2 = at::vec::Vectorized<float>(tmp1);",
              "auto tmp3 = tmp0 * tmp2;", "auto tmp4 = bad_vtanh(tmp3);", "auto tmp5 = tmp4.exp();",
              "auto tmp6 = static_cast<float>(1.0);", "auto tmp7 = at::vec::Vectorized<float>(tmp6);",
              "auto tmp8 = tmp5 + tmp7;", "tmp8.store(out_ptr0 + static_cast<int64_t>(x0));"]
    statements, at = kernel_statements(vector, 4)
    assert statement_node(statements, at, [("mul", "mul"), ("tanh", "tanh"), ("exp", "exp"), ("add", "add")]) \
        == "tanh"
    assert statement_node(["auto tmp0 = max_propagate_nan(tmp1, tmp2);"], 0,
                          [("neg", "neg"), ("maximum", "maximum")]) == "maximum"


def test_load_run_maps_the_failure_from_the_trace_with_or_without_the_cached_cpp(failed_run: InductorWorkspace,
                                                                                 tmp_path: Path):
    cache = str(failed_run.path / "inductor_cache")
    for name, cpp_gone in (("kept", False), ("cleaned", True)):  # cleaned: g++'s echoed line identifies it
        debug = shutil.copytree(failed_run.path / "torch_compile_debug", tmp_path / name / "torch_compile_debug")
        if cpp_gone:
            for log in (debug / "tlparse").glob("*.log"):  # the .cpp named in the error is gone
                log.write_text(log.read_text().replace(cache, str(tmp_path / "no_cache")))
        (run_dir,) = find_run_dirs(debug)
        (graph,) = load_run(run_dir).graphs
        assert graph.status == "compile_error"
        (error,) = [d for d in graph.compile_error.diagnostics if d.severity == "error"]
        assert ("no_cache" in error.cpp_file) == cpp_gone
        assert "bad_tanh" in error.message and error.kernel.startswith("cpp_fused_")
        assert error.nodes == ["tanh"] and error.source.line == TANH_LINE + 1
        assert "bad_tanh" in graph.code_line(error.output_code_line)
        assert graph.compile_error.command.startswith("g++ ")


@pytest_lsp.fixture(config=SERVER)
async def empty_client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "ws").mkdir()
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def test_error_lands_on_the_tanh_line_when_the_trace_arrives_after_the_run(empty_client: LanguageClient,
                                                                                  failed_run: InductorWorkspace,
                                                                                  tmp_path: Path):
    workspace = tmp_path / "ws"
    script = workspace / "x.py"
    shutil.copy(failed_run.script, script)
    debug = failed_run.path / "torch_compile_debug"
    (log,) = (debug / "tlparse").glob("*.log")  # its paths still name the first workspace: only the pid counts
    (run_dir,) = find_run_dirs(debug)
    staged = workspace / ".staging"
    shutil.copytree(run_dir, staged)
    for path in staged.rglob("*.py"):
        path.write_text(path.read_text().replace(str(failed_run.path), str(workspace)))
    (workspace / "torch_compile_debug").mkdir()
    os.replace(staged, workspace / "torch_compile_debug" / run_dir.name)  # the run's files first, as Inductor
    runs = None
    for _ in range(600):
        runs = await empty_client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="kernelLens.listRuns"))
        if runs:
            break
        await asyncio.sleep(0.05)
    assert runs and script.as_uri() not in empty_client.diagnostics
    (workspace / "torch_compile_debug" / "tlparse").mkdir()
    shutil.copy(log, workspace / "torch_compile_debug" / "tlparse" / log.name)
    found = await wait_for_diagnostics(empty_client, script.as_uri(), lambda ds: bool(ds))
    (error,) = [d for d in found if d.severity == types.DiagnosticSeverity.Error]
    assert error.range.start.line == TANH_LINE and error.range.start.line != MUL_LINE
    assert "bad_tanh" in error.message and "node tanh" in error.message
