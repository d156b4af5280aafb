"""Each debugging path end to end: a real script -> `kernel-lens` -> real debug files -> the real server
publishes the diagnostic on the user's own line (pytest-lsp). Ours (compile error, accuracy mismatch)
and real Inductor's C++ compile error (the seed's patched `neg`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics

SEED = '''import torch
import compiler.config
compiler.config.cpp.op_overrides = {override}


def foo1(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=1)
    return y


x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
torch.compile(foo1, backend="lens")(x1, x2)
'''
NEG_LINE, MAX_LINE = 6, 7  # 0-based lines of `a = torch.neg(x1)` and `b = torch.maximum(x2, a)`

INDUCTOR_BUG = textwrap.dedent('''
    import torch
    import torch._inductor.codegen.cpp as cpp
    cpp.CppOverrides.neg = staticmethod(lambda x: f"-{x}")
    torch._inductor.config.cpp.simdlen = 1


    def foo1(x1, x2):
        a = torch.neg(x1)
        b = torch.maximum(x2, a)
        return torch.cat([b], dim=1)


    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    torch.compile(foo1)(x1, x2)
''').lstrip()
INDUCTOR_MAX_LINE = 8


def run_cli(verb: str, script: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "compiler", verb, str(script)], capture_output=True, text=True,
                          timeout=900, env=env)


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three workspaces made by the real CLI: lens compile error, lens accuracy mismatch, Inductor error."""
    out = {}
    ws = tmp_path_factory.mktemp("lens_compile_error")
    (ws / "prog.py").write_text(SEED.format(override='{"neg": "-{x}"}'))
    assert run_cli("compile", ws / "prog.py").returncode == 1
    out["compile_error"] = ws
    ws = tmp_path_factory.mktemp("lens_accuracy")
    (ws / "prog.py").write_text(SEED.format(override='{"neg": "decltype({x})(2 * {x})"}'))
    assert run_cli("check-accuracy", ws / "prog.py").returncode == 1
    out["accuracy"] = ws
    ws = tmp_path_factory.mktemp("inductor_compile_error")
    (ws / "prog.py").write_text(INDUCTOR_BUG)
    proc = run_cli("compile", ws / "prog.py", {"TORCHINDUCTOR_CACHE_DIR": str(ws / "inductor_cache")})
    assert proc.returncode == 1 and "mapped to source" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    out["inductor"] = ws
    return out


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_lens_compile_error_lands_on_the_maximum_line(client: LanguageClient, real_runs):
    ws = real_runs["compile_error"]
    await start_session(client, ws)
    got = await wait_for_diagnostics(client, (ws / "prog.py").as_uri(), lambda d: len(d) >= 1, timeout=30)
    d = next(x for x in got if x.severity == types.DiagnosticSeverity.Error)
    assert d.range.start.line == MAX_LINE
    assert "max_propagate_nan" in d.message and "cpp_fused_" in d.message


async def test_lens_accuracy_mismatch_lands_on_the_neg_line(client: LanguageClient, real_runs):
    ws = real_runs["accuracy"]
    await start_session(client, ws)
    got = await wait_for_diagnostics(client, (ws / "prog.py").as_uri(), lambda d: len(d) >= 1, timeout=30)
    lines = {d.range.start.line for d in got}
    assert NEG_LINE in lines, [(d.range.start.line, d.message) for d in got]
    message = next(d.message for d in got if d.range.start.line == NEG_LINE)
    assert "neg" in message


async def test_real_inductor_compile_error_lands_on_the_users_line(client: LanguageClient, real_runs):
    ws = real_runs["inductor"]
    await start_session(client, ws)
    got = await wait_for_diagnostics(client, (ws / "prog.py").as_uri(), lambda d: len(d) >= 1, timeout=30)
    d = next(x for x in got if x.severity == types.DiagnosticSeverity.Error)
    assert d.range.start.line == INDUCTOR_MAX_LINE
    assert "max_propagate_nan" in d.message
