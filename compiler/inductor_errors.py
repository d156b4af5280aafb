"""Real Inductor's C++ compile failures (`InductorError: CppCompileError`), mapped like ours: g++'s
`file.cpp:LINE:COL: error:` -> the kernel in the graph's output_code.py -> FX node -> user source line,
written as compile_error.json into the failing graph's debug folder."""
from __future__ import annotations

import glob
import json
import os
import re

from compiler.build import parse_diagnostics

_KERNEL_BLOCK = re.compile(r"^(?P<name>\w+) = async_compile\.cpp_pybinding\(.*r'''$")
_FILE_COMMENT = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")
_NODE_LINE = re.compile(r"^\s+(?P<name>\w+)(: [^=]+)? = torch\.ops\.(?P<target>[\w.]+)\(")
# C++ helpers Inductor emits for an aten op, where the name differs
_HELPER_OPS = {"max_propagate_nan": "maximum", "min_propagate_nan": "minimum"}


def has_inductor_compile_error(text: str) -> bool:
    return "CppCompileError" in text and "error:" in text


def _command(text: str) -> str:
    m = re.search(r"Command:\n(?P<cmd>.+)", text)
    return m["cmd"].strip() if m else ""


def _readable_nodes(graph_dir: str) -> list[dict]:
    """Nodes of fx_graph_readable.py with the `# File:` source comment before them."""
    nodes, source = [], None
    try:
        with open(os.path.join(graph_dir, "fx_graph_readable.py")) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for number, line in enumerate(lines, 1):
        m = _FILE_COMMENT.match(line)
        if m:
            source = {"file": m["file"], "line": int(m["line"]), "function": m["fn"].strip(), "code": m["code"]}
            continue
        m = _NODE_LINE.match(line)
        if m:
            nodes.append({"name": m["name"], "target": m["target"], "readable_line": number, "source": source})
    return nodes


def _kernel_blocks(graph_dir: str) -> list[tuple[str, int, list[str]]]:
    """(kernel name, output_code.py line of the string's first line, the C++ lines) per C++ kernel."""
    try:
        with open(os.path.join(graph_dir, "output_code.py")) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    blocks, i = [], 0
    while i < len(lines):
        m = _KERNEL_BLOCK.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("'''"):
                j += 1
            blocks.append((m["name"], i + 2, lines[i + 1:j]))
            i = j
        i += 1
    return blocks


def _locate(cpp_lines: list[str], cpp_line: int, blocks) -> tuple[str, int] | None:
    """The kernel holding C++ line `cpp_line` and that line's number in output_code.py."""
    target = cpp_lines[cpp_line - 1].strip() if 0 < cpp_line <= len(cpp_lines) else ""
    header = next((k for k, t in enumerate(cpp_lines, 1) if t.startswith('extern "C"')), None)
    for name, first, body in blocks:
        b_header = next((k for k, t in enumerate(body, 1) if t.startswith('extern "C"')), None)
        if header is None or b_header is None:
            continue
        k = b_header + (cpp_line - header)
        if 0 < k <= len(body) and body[k - 1].strip() == target:
            return name, first + k - 1
    return None


def _nodes_for(kernel: str | None, line_text: str, nodes: list[dict]) -> list[dict]:
    ops = kernel[len("cpp_fused_"):].rsplit("_", 1)[0] if kernel and kernel.startswith("cpp_fused_") else ""
    in_kernel = [n for n in nodes if n["target"].split(".")[1] in ops] if ops else []
    called = {_HELPER_OPS.get(f, f) for f in re.findall(r"(\w+)\s*\(", line_text)}
    on_line = [n for n in in_kernel if n["target"].split(".")[1] in called]
    return on_line or in_kernel


def map_inductor_compile_error(text: str, graph_dir: str) -> dict:
    """compile_error.json's content for a real Inductor failure whose output is `text`."""
    blocks = _kernel_blocks(graph_dir)
    nodes = _readable_nodes(graph_dir)
    diagnostics = []
    for d in parse_diagnostics(text):
        try:
            with open(d.file) as f:
                cpp_lines = f.read().splitlines()
        except OSError:
            cpp_lines = []
        found = _locate(cpp_lines, d.line, blocks) if cpp_lines else None
        kernel, oc_line = found if found else (None, None)
        line_text = cpp_lines[d.line - 1] if 0 < d.line <= len(cpp_lines) else ""
        matched = _nodes_for(kernel, line_text, nodes) if d.severity == "error" else []
        source = next((n["source"] for n in matched if n["source"]), None)
        diagnostics.append({"severity": d.severity, "message": d.message, "cpp_file": d.file, "cpp_line": d.line,
                            "column": d.column, "output_code_line": oc_line, "kernel": kernel,
                            "nodes": [n["name"] for n in matched], "source": source})
    return {"version": 1, "graph_id": os.path.basename(os.path.normpath(graph_dir)), "command": _command(text),
            "diagnostics": diagnostics, "backend": "inductor"}


def write_inductor_compile_errors(text: str, runs: list[str]) -> list[str]:
    """Write compile_error.json into the newest Inductor graph folder of these runs; returns its path."""
    graphs = sorted((g for run in runs for g in glob.glob(os.path.join(run, "torchinductor", "*", ""))),
                    key=os.path.getmtime)
    if not graphs or not has_inductor_compile_error(text):
        return []
    graph_dir = graphs[-1]
    path = os.path.join(graph_dir, "compile_error.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(map_inductor_compile_error(text, graph_dir), f, indent=1)
    os.replace(tmp, path)
    return [path]
