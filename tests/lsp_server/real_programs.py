"""Real programs for the editor's answers (issue 45): a module file with three classes (one never called), a script
with graph breaks, an entry function that only calls a model, a transformers GPT-2 built from a small config;
compiled once per session by our backend (`LENS_DEBUG=1`), and the ground truth read straight from the
kernel_map.json files they wrote (which kernels computed nodes of which source lines, and of which callers)."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

CLASSES = '''import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        g = torch.sigmoid(self.proj(x))
        return x * g


class Unused(nn.Module):
    def forward(self, x):
        return torch.tanh(x) + 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()

    def forward(self, x):
        h = self.gate(x)
        s = h.sum(dim=-1, keepdim=True)
        return torch.relu(h - s)


if __name__ == "__main__":
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(Net(), backend="lens")(torch.randn(8, 16))
'''

BREAKS = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        print("half way")
        s = h.sum(dim=-1, keepdim=True)
        return self.norm(h - s)


def step(model, x):
    y = model(x) * 2
    n = int(y.abs().sum().item() > 0)
    print("step", n)
    z = torch.sigmoid(y).mean(dim=-1)
    return z


if __name__ == "__main__":
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(step, backend="lens")(Block(), torch.randn(4, 32))
'''

ENTRY = '''import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 64)
        self.down = nn.Linear(64, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(x))
        return self.down(h) + x


def run(model, x):
    return model(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(run, backend="lens")(Mlp(), torch.randn(8, 16))
'''

GPT2 = '''import torch
from transformers import GPT2Config, GPT2Model

if __name__ == "__main__":
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32)
    model = GPT2Model(config).eval()
    with torch.no_grad():
        torch.compile(model, backend="lens")(torch.randint(0, 100, (1, 8)))
'''

LENS_RUN = ([sys.executable, "PROG"], {"LENS_DEBUG": "1"})


def line_of(text: str, line_text: str, nth: int = 0) -> int:
    """1-based line of the `nth` line whose stripped text is `line_text`."""
    found = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip() == line_text]
    return found[nth]


def def_span(text: str, qualname: str) -> tuple[int, int]:
    """(the `def` line, its last line) of `Class.method` / `function` in `text` (1-based)."""
    def visit(node: ast.AST, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if name == qualname and isinstance(child, ast.FunctionDef):
                    return child.lineno, child.end_lineno
                found = visit(child, name + ".")
                if found:
                    return found
        return None
    return visit(ast.parse(text), "")


def kernel_maps(workspace: Path) -> list[tuple[str, dict]]:
    return [(path.parent.name, json.loads(path.read_text()))
            for path in sorted(workspace.glob("torch_compile_debug/run_*/lens/graph_*/kernel_map.json"))]


def truth_own(workspace: Path, file: Path, first: int, last: int) -> list[tuple[str, str]]:
    """(graph, kernel) of every kernel computing a node whose own source line is in first..last of `file`, in
    graph then kernel order: what a `def` spanning those lines must list."""
    found = []
    for graph, data in kernel_maps(workspace):
        lines = {n["name"]: n["source"] for n in data["nodes"] if n.get("source")}
        for kernel in data["kernels"]:
            if any(s["file"] == str(file) and first <= s["line"] <= last
                   for n in kernel["nodes"] if (s := lines.get(n))):
                found.append((graph, kernel["name"]))
    return found


def truth_via(workspace: Path, file: Path, first: int, last: int) -> list[tuple[str, str]]:
    """(graph, kernel) of every kernel computing a node one of whose callers' frames is on first..last of `file`."""
    found = []
    for graph, data in kernel_maps(workspace):
        called = {n["name"] for n in data["nodes"]
                  if any(c["file"] == str(file) and first <= c["line"] <= last for c in n.get("callers", []))}
        found += [(graph, k["name"]) for k in data["kernels"] if called & set(k["nodes"])]
    return found
