"""Issue 47: where a Triton kernel's compiled chain opens from (`kernelLens.tritonKernelsAt`), on the committed
H100 training step: a line of the user's program leads to the Triton kernels computing it (each at its first
Triton line from that line, most costly first), a line of a kernel's own file (the `.py` Inductor wrote and the
IR's loc records name) to the same line embedded in output_code.py; a line no kernel computes says so."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

TRAIN = FIXTURES / "inductor_gpu_train"
GELU = "triton_poi_fused_gelu_view_7"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "ws", "transformer_train", TRAIN)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def command(client: LanguageClient, name: str, argument: dict):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name,
                                                                                   arguments=[argument]))


def output_code(workspace: Path, graph: str) -> Path:
    return next(workspace.glob(f"torch_compile_debug/run_*/torchinductor/{graph}/output_code.py"))


def kernel_file_of(code: Path, kernel: str) -> Path:
    """The `# kernel path:` comment above the kernel's `async_compile.triton(` line."""
    lines = code.read_text().splitlines()
    opening = next(n for n, text in enumerate(lines) if text.startswith(f"{kernel} = async_compile.triton("))
    comment = next(text for text in reversed(lines[:opening]) if text.startswith("# kernel path: "))
    return Path(comment.removeprefix("# kernel path: "))


async def test_a_user_line_leads_to_the_triton_kernels_computing_it(client: LanguageClient, workspace: Path):
    prog = workspace / "prog.py"
    gelu = line_of(prog, "h = F.gelu(")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": prog.as_uri(), "line": gelu})
    starts = answer["kernels"]
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    line_kernels = next(e for e in costs["lines"] if e["line"] == gelu)["kernels"]
    # every Triton kernel the line's cost comes from (each has its cache entries kept), and only those
    assert sorted((k["graph_id"], k["kernel"]) for k in starts) == \
        sorted((k["graph_id"], k["name"]) for k in line_kernels if k["name"].startswith("triton_"))
    assert ("model__0_forward_1.0", GELU) in {(k["graph_id"], k["kernel"]) for k in starts}
    assert {"model__0_backward_3.1"} <= {k["graph_id"] for k in starts}
    assert [k["ms"] for k in starts] == sorted((k["ms"] for k in starts), reverse=True)
    for start in starts:  # each opens at a Triton line of its kernel that came from the user's line
        assert start["uri"] == output_code(workspace, start["graph_id"]).as_uri()
        chain = await command(client, "kernelLens.tritonChain", {"uri": start["uri"], "line": start["line"]})
        assert chain["kernel"] == start["kernel"] and chain["precision"] == "line", chain
        assert chain["source"] == {"uri": prog.as_uri(), "line": gelu}
    forward = next(k for k in starts if k["kernel"] == GELU)
    text = output_code(workspace, "model__0_forward_1.0").read_text().splitlines()[forward["line"]]
    assert re.search(r"tmp\d+ = ", text), text  # a computing line of the kernel, not its def or a load


async def test_a_kernel_files_line_leads_to_the_same_line_in_output_code(client: LanguageClient, workspace: Path):
    code = output_code(workspace, "model__0_forward_1.0")
    kernel_file = kernel_file_of(code, GELU)
    assert kernel_file.is_relative_to(workspace / "inductor_cache")
    own = kernel_file.read_text().splitlines()
    generated = code.read_text().splitlines()
    erf = next(n for n, text in enumerate(own) if "libdevice.erf(" in text)
    starts = {}
    for line0 in (1, erf, len(own) - 1):
        answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": kernel_file.as_uri(), "line": line0})
        (starts[line0],) = answer["kernels"]
        start = starts[line0]
        assert (start["kernel"], start["graph_id"], start["uri"]) == (GELU, "model__0_forward_1.0", code.as_uri())
        assert generated[start["line"]] == own[line0]
    chain = await command(client, "kernelLens.tritonChain", {"uri": code.as_uri(), "line": starts[erf]["line"]})
    assert chain["triton"]["kernel_file_line"] == erf + 1
    assert chain["source"]["line"] == line_of(workspace / "prog.py", "h = F.gelu(")


async def test_lines_without_a_triton_kernel_say_so(client: LanguageClient, workspace: Path):
    prog = workspace / "prog.py"
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": prog.as_uri(), "line": 0})
    assert answer == {"error": "no Triton kernel with a Triton cache entry kept beside its run computes this line"}
    code = output_code(workspace, "model__0_forward_1.0")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": code.as_uri(), "line": 0})
    assert answer["error"].startswith("not a line of a Triton kernel")
    elsewhere = workspace / "notes.py"
    elsewhere.write_text("x = 1\n")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": elsewhere.as_uri(), "line": 0})
    assert answer == {"error": "not a line of an indexed run's file or Triton kernel"}
