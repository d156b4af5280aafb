"""Issue 47: where a Triton kernel's compiled chain opens from (`kernelLens.tritonKernelsAt`), on the committed
H100 training step: a line of the user's program leads to the Triton kernels computing it whose stages are kept
(each at its first Triton line from that line that compiled to instructions in every stage, most costly first),
a line of a kernel's own file (the `.py` Inductor wrote and the IR's loc records name) to the same line embedded
in output_code.py; a line no kernel computes says so."""
from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

TRAIN = FIXTURES / "inductor_gpu_train"
GELU = "triton_poi_fused_gelu_view_7"
QKV = "triton_poi_fused_addmm_clone_split_transpose_view_1"
SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_3"


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


@pytest.mark.parametrize(("text", "kernels", "on_launch_only"), [
    # the transpose's `clone` is on the launch of the qkv kernel only: no Triton line of it comes from this line
    ("scores = (q @ k.transpose(-2, -1))", {QKV, SOFTMAX}, {QKV}),
    ("h = F.gelu(", {GELU}, set()),
])
async def test_a_user_line_leads_to_the_triton_kernels_computing_it(client: LanguageClient, workspace: Path,
                                                                     text: str, kernels: set[str],
                                                                     on_launch_only: set[str]):
    prog = workspace / "prog.py"
    line = line_of(prog, text)
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": prog.as_uri(), "line": line})
    starts = answer["kernels"]
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    line_kernels = next(e for e in costs["lines"] if e["line"] == line)["kernels"]
    # every Triton kernel the line's cost comes from whose stages are kept (the fixture keeps a few's), only those
    staged = {p.stem for p in workspace.glob("torch_compile_debug/run_*/triton_cache/*/*.ttir")}
    triton = {(k["graph_id"], k["name"]) for k in line_kernels if k["name"].startswith("triton_")}
    assert sorted((k["graph_id"], k["kernel"]) for k in starts) == sorted(k for k in triton if k[1] in staged)
    assert {k["kernel"] for k in starts} == kernels
    assert [k["ms"] for k in starts] == sorted((k["ms"] for k in starts), reverse=True)
    for start in starts:  # each opens at a Triton line of its kernel that came from the user's line, else its def
        assert start["uri"] == output_code(workspace, start["graph_id"]).as_uri()
        chain = await command(client, "kernelLens.tritonChain", {"uri": start["uri"], "line": start["line"]})
        code = output_code(workspace, start["graph_id"]).read_text().splitlines()[start["line"]]
        assert chain["kernel"] == start["kernel"], start
        if start["kernel"] in on_launch_only:
            assert code.startswith(f"def {start['kernel']}(") and chain["precision"] == "kernel", code
            continue
        assert all(stage["lines"] for stage in chain["stages"].values()), start  # it compiled to instructions
        assert chain["precision"] == "line" and chain["source"] == {"uri": prog.as_uri(), "line": line}, chain
        assert "tl.full(" not in code, code  # a constant compiles to none


async def test_metadata_only_kernels_are_not_offered(client: LanguageClient, workspace: Path):
    """The gelu line's backward kernels have only their metadata kept (no stage to show)."""
    prog = workspace / "prog.py"
    line = line_of(prog, "h = F.gelu(")
    costs = await command(client, "kernelLens.lineCosts", {"uri": prog.as_uri()})
    line_kernels = next(e for e in costs["lines"] if e["line"] == line)["kernels"]
    assert any(k["graph_id"] == "model__0_backward_3.1" and k["name"].startswith("triton_") for k in line_kernels)
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": prog.as_uri(), "line": line})
    assert [k["kernel"] for k in answer["kernels"]] == [GELU]


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
    assert answer == {"error": "no Triton kernel whose compiled stages are kept beside its run computes this line"}
    code = output_code(workspace, "model__0_forward_1.0")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": code.as_uri(), "line": 0})
    assert answer["error"].startswith("not a line of a Triton kernel")
    unstaged = "triton_per_fused_add_native_layer_norm_backward_view_10"  # its entry kept without stages
    backward = output_code(workspace, "model__0_backward_3.1")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": kernel_file_of(backward, unstaged).as_uri(),
                                                                  "line": 3})
    assert answer == {"error": f"`{unstaged}`: no compiled stage kept beside its run (or no entry known as launched)"}
    elsewhere = workspace / "notes.py"
    elsewhere.write_text("x = 1\n")
    answer = await command(client, "kernelLens.tritonKernelsAt", {"uri": elsewhere.as_uri(), "line": 0})
    assert answer == {"error": "not a line of an indexed run's file or Triton kernel"}
