"""Real Inductor C++ statements map to the right FX node (issue 45), through the real server on a real
`TORCH_COMPILE_DEBUG=1` CPU run: a kernel fusing a softmax, a sigmoid and a LayerNorm (the softmax's `exp()` is
`exp`, not `sigmoid`), and an attention whose ATen fallback (SDPA) is a kernel on its own node; and Triton
statements of a real GPU run (the committed H100 fixture tests/fixtures/inductor_gpu/softmax). The statement cases
measured by benchmarks/statement_map_bench.py (ground truth from op swaps) are test_statement_cases.py's."""
from __future__ import annotations

import os
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import GPU_FIXTURES, SERVER, gpu_workspace, program_workspace, start_session
from real_programs import line_of
from test_function_kernels import hover, kernels_at

PROGRAM = '''import torch
import torch.nn.functional as F


def mix(x, w, b):
    h = x * 0.5
    a = torch.softmax(h, dim=-1)
    g = torch.sigmoid(x + 1.0)
    y = a * g
    return F.layer_norm(y, (x.shape[-1],), w, b)


def attention(q, k, v, mask):
    m = (1.0 - mask) * -10000.0
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    return torch.tanh(o) @ v.transpose(-1, -2)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.compile(mix)(torch.randn(64, 128), torch.randn(128), torch.randn(128))
    q, k, v = (torch.randn(2, 4, 16, 32) for _ in range(3))
    torch.compile(attention)(q, k, v, (torch.rand(2, 1, 16, 16) > 0.2).float())
'''
SDPA = "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"


@pytest.fixture(scope="session")
def inductor_ws(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("inductor_statements_cache"))
    return program_workspace(tmp_path_factory, "inductor_statements", PROGRAM, (
        [sys.executable, "PROG"], {"TORCH_COMPILE_DEBUG": "1", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
                                   "TORCHINDUCTOR_CACHE_DIR": cache}))


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, inductor_ws):
    await start_session(lsp_client, inductor_ws)
    yield
    await lsp_client.shutdown_session()


def graph(ws, number: int):
    return next(ws.glob(f"torch_compile_debug/run_*/torchinductor/model__{number}_inference_*"))


async def test_softmax_exp_and_sigmoid_statements_are_their_own_nodes(client, inductor_ws):
    code = graph(inductor_ws, 0) / "output_code.py"
    exp = line_of(code.read_text(), "auto tmp18 = tmp17.exp();")
    text = await hover(client, code, exp)
    assert "FX node `exp` = `aten.exp.default`" in text and "`sigmoid`" not in text
    assert f"prog.py:{line_of(PROGRAM, 'a = torch.softmax(h, dim=-1)')}" in text
    sigmoid = line_of(code.read_text(), "auto tmp8 = decltype(tmp7)(1)/(decltype(tmp7)(1) + tmp7.neg().exp());")
    text = await hover(client, code, sigmoid)
    assert "FX node `sigmoid` = `aten.sigmoid.default`" in text and "FX node `exp`" not in text
    linked = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "kernelLens.linkedLines", [{"uri": (inductor_ws / "prog.py").as_uri()}]))
    lines = code.read_text().splitlines()
    by_line = {link["source_line"] + 1: [lines[n].strip() for n in link["generated_lines"]] for link in linked["links"]}
    norm = by_line[line_of(PROGRAM, "return F.layer_norm(y, (x.shape[-1],), w, b)")]
    assert "auto tmp15 = tmp13 + tmp14;" in norm and "auto tmp4 = tmp3 * tmp3;" in norm  # bias add, variance
    assert "auto tmp3 = tmp0 * tmp2;" not in norm and "auto tmp18 = tmp17.exp();" not in norm  # the softmax's
    assert "auto tmp18 = tmp17.exp();" in by_line[line_of(PROGRAM, "a = torch.softmax(h, dim=-1)")]


async def test_a_fallback_kernel_is_its_own_nodes(client, inductor_ws):
    prog, folder = inductor_ws / "prog.py", graph(inductor_ws, 1).name
    sdpa = line_of(PROGRAM, "o = F.scaled_dot_product_attention(q, k, v, attn_mask=m)")
    mask = line_of(PROGRAM, "m = (1.0 - mask) * -10000.0")
    assert await kernels_at(client, prog, sdpa) == [(folder, SDPA)]
    assert await kernels_at(client, prog, mask) == [
        (folder, "cpp_fused__scaled_dot_product_flash_attention_for_cpu_mul_rsub_0")]
    code = graph(inductor_ws, 1) / "output_code.py"
    text = await hover(client, code, line_of(code.read_text(), f"buf1 = {SDPA}(arg1_1, arg2_1, arg3_1, attn_mask=buf0)"))
    assert f"`{SDPA}` (extern)" in text and "FX node `_scaled_dot_product_flash_attention_for_cpu`" in text
    assert "FX node `mul`" not in text


SOFTMAX, LOG_SOFTMAX = "p = torch.softmax(x, dim=-1)", "q = torch.log_softmax(w, dim=-1)"


@pytest.fixture
def softmax_ws(tmp_path):
    return gpu_workspace(tmp_path / "ws", "softmax", GPU_FIXTURES)


@pytest_lsp.fixture(config=SERVER)
async def triton_client(lsp_client: LanguageClient, softmax_ws):
    await start_session(lsp_client, softmax_ws)
    yield
    await lsp_client.shutdown_session()


async def test_triton_statements_are_their_own_nodes(triton_client, softmax_ws):
    """`softmax(x)` and `log_softmax(w)` of prog.py (lines 4 and 5) on an H100: the softmax kernel's division is
    `div` (line 4), the log-softmax kernel's `tl_math.log` is `log` (line 5), each linked to its own source line."""
    code = graph(softmax_ws, 0) / "output_code.py"
    prog = (softmax_ws / "prog.py").read_text()
    text = await hover(triton_client, code, line_of(code.read_text(), "tmp15 = (tmp14 / tmp12)"))
    assert "FX node `div` = `aten.div.Tensor`" in text and f"prog.py:{line_of(prog, SOFTMAX)}" in text
    text = await hover(triton_client, code, line_of(code.read_text(), "tmp4 = tl_math.log(tmp3)"))
    assert "FX node `log` = `aten.log.default`" in text and f"prog.py:{line_of(prog, LOG_SOFTMAX)}" in text
    linked = await triton_client.workspace_execute_command_async(types.ExecuteCommandParams(
        "kernelLens.linkedLines", [{"uri": (softmax_ws / "prog.py").as_uri()}]))
    lines = code.read_text().splitlines()
    by_line = {link["source_line"] + 1: [lines[n].strip() for n in link["generated_lines"]] for link in linked["links"]}
    softmax, log_softmax = by_line[line_of(prog, SOFTMAX)], by_line[line_of(prog, LOG_SOFTMAX)]
    assert "tmp15 = (tmp14 / tmp12)" in softmax and "tmp4 = tl_math.log(tmp3)" not in softmax
    assert "tmp4 = tl_math.log(tmp3)" in log_softmax and "tmp15 = (tmp14 / tmp12)" not in log_softmax
