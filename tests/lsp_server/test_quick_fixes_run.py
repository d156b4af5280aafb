"""Every quick fix runs (issue 45): each code action the server offers for a real structured trace is applied to
the real script, which then runs under torch.compile: the graph break or recompile it names is gone, and every
compiled result still equals eager's. The script reports Dynamo's own counters after each call."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import SERVER, start_session
from real_programs import line_of

PROGRAM = '''import torch
from torch._dynamo.utils import counters


def f(x):
    y = x * 2
    print("y")
    return y.sin()


def g(x):
    n = x.sum().item()
    return x * n


def h(x):
    return x.cos() + 1


def k(x):
    idx = torch.nonzero(x > 0)
    return idx.float().sum()


def report(name, out, expected):
    torch.testing.assert_close(out, expected)
    print(f"{name} breaks={sum(counters['graph_break'].values())} graphs={counters['stats']['unique_graphs']}")
    counters.clear()


if __name__ == "__main__":
    x = torch.randn(8)
    report("f", torch.compile(f, backend="lens")(x), f(x))
    report("g", torch.compile(g, backend="lens")(x), g(x))
    ch = torch.compile(h, backend="lens")
    ch(torch.randn(4))
    report("h", ch(torch.ones(5)), h(torch.ones(5)))
    report("k", torch.compile(k, backend="lens")(x), k(x))
'''
# As it runs unfixed: each function's break or recompile (h: its 2nd graph), counted by Dynamo.
UNFIXED = {"f": "breaks=1 graphs=2", "g": "breaks=1 graphs=2", "h": "breaks=0 graphs=2", "k": "breaks=1 graphs=2"}


def run(folder: Path, text: str, trace: bool = False) -> dict[str, str]:
    (folder / "prog.py").write_text(text)
    env = {**os.environ, **({"TORCH_TRACE": str(folder / "torch_trace")} if trace else {})}
    done = subprocess.run([sys.executable, str(folder / "prog.py")], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {line.split()[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()
            if line.split(" ", 1)[0] in UNFIXED and "breaks=" in line}


@pytest.fixture(scope="session")
def traced_ws(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("quick_fixes")
    counted = run(ws, PROGRAM, trace=True)
    assert counted == UNFIXED
    return ws


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, traced_ws: Path):
    await start_session(lsp_client, traced_ws)
    yield
    await lsp_client.shutdown_session()


def apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    at = lambda p: offsets[p.line] + p.character  # noqa: E731
    for edit in sorted(edits, key=lambda e: (at(e.range.start), at(e.range.end)), reverse=True):
        text = text[:at(edit.range.start)] + edit.new_text + text[at(edit.range.end):]
    return text


async def actions_at(client: LanguageClient, uri: str, line: int) -> list[types.CodeAction]:
    for _ in range(100):  # the trace's findings reach the index after the server indexed the logs
        if client.diagnostics.get(uri):
            break
        await asyncio.sleep(0.1)
    here = types.Range(types.Position(line - 1, 0), types.Position(line - 1, 0))
    found = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), here, types.CodeActionContext(client.diagnostics.get(uri, []))))
    return list(found or [])


CASES = [  # (the line the break or recompile is reported on, the function, the fix's title, what it inserts)
    ('print("y")', "f", "Let Dynamo move `print` after the graph",
     "torch._dynamo.config.reorderable_logging_functions.add(print)\n"),
    ("n = x.sum().item()", "g", "Set torch._dynamo.config.capture_scalar_outputs = True",
     "torch._dynamo.config.capture_scalar_outputs = True\n"),
    ("idx = torch.nonzero(x > 0)", "k", "Set torch._dynamo.config.capture_dynamic_output_shape_ops = True",
     "torch._dynamo.config.capture_dynamic_output_shape_ops = True\n"),
    ("def h(x):", "h", "Mark x[0] dynamic before the call", "torch._dynamo.mark_dynamic(x_dynamic, 0)"),
]


@pytest.mark.parametrize("line_text,function,title,inserted", CASES, ids=[c[1] for c in CASES])
async def test_each_quick_fix_removes_what_it_names_and_keeps_eagers_result(client, traced_ws, tmp_path, line_text,
                                                                          function, title, inserted):
    uri = (traced_ws / "prog.py").as_uri()
    line = line_of(PROGRAM, line_text)
    actions = [a for a in await actions_at(client, uri, line) if a.title.startswith(title)]
    assert len(actions) == 1, [a.title for a in await actions_at(client, uri, line)]
    fixed = apply(PROGRAM, actions[0].edit.changes[uri])
    assert inserted in fixed
    counted = run(tmp_path, fixed)  # asserts eager's result for every function
    assert counted[function] == "breaks=0 graphs=1"
    assert {name: c for name, c in counted.items() if name != function} == \
        {name: c for name, c in UNFIXED.items() if name != function}
