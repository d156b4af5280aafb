"""Real Inductor's C++ compile failures (`InductorError: CppCompileError`), mapped like ours: g++'s
`file.cpp:LINE:COL: error:` -> the kernel in the graph's output_code.py -> FX node -> user source line,
written as compile_error.json into the failing graph's debug folder."""
from __future__ import annotations

import glob
import json
import os
import re

from compiler.machine.build import parse_diagnostics
from lens_format.compile_error import CompileDiagnostic, CompileError
from lens_format.jsonio import parse_source_ref

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


_TMP_DEFINITION = re.compile(r"\btmp(?P<number>\d+)\s*=(?!=)")
_CALLED = re.compile(r"([A-Za-z_][\w:]*)\s*\(")
_BINARY = re.compile(r"\btmp\d+\)?\s*([*/+-])\s*[\w(]")  # a value's arithmetic, not an index's (`in_ptr0 + x0`)
_OPERATORS = {"*": "mul", "+": "add", "-": "sub", "/": "div"}


def _statement_ops(text: str) -> set[str]:
    """Op names a C++ statement shows: functions it calls (namespace dropped, helpers renamed) and operators."""
    rhs = text.split("=", 1)[1] if _TMP_DEFINITION.search(text) else text
    names = {n.rsplit("::", 1)[-1] for n in _CALLED.findall(rhs)}
    ops = {_HELPER_OPS.get(n, n) for n in names} | {_OPERATORS[o] for o in _BINARY.findall(rhs)}
    if re.search(r"(?:^|[=(,])\s*-\s*[\w(]", rhs):
        ops |= {"neg", "sub"}
    return ops


def _statements(cpp_lines: list[str], failing: int) -> tuple[list[str], int]:
    """The `tmpN = ...` statements of the loop holding line `failing` (0-based; always included) and its
    position among them. A vectorised kernel's tail loop starts again at tmp0: a new run of statements."""
    runs: list[list[tuple[int, str]]] = [[]]
    last = -1
    for index, text in enumerate(cpp_lines):
        found = _TMP_DEFINITION.search(text)
        if found is not None:
            if int(found["number"]) <= last and runs[-1]:
                runs.append([])
            last = int(found["number"])
        if found is not None or index == failing:
            runs[-1].append((index, text))
    run = next((r for r in runs if any(i == failing for i, _ in r)), [])
    return [t for _, t in run], next((p for p, (i, _) in enumerate(run) if i == failing), -1)


def _nodes_for(kernel: str | None, cpp_lines: list[str], cpp_line: int, nodes: list[dict]) -> list[dict]:
    """The node the failing statement computes. Inductor's C++ has no per-statement origin, but a kernel's
    statements follow its nodes in topological order: statements naming an op anchor that order, and a
    statement naming none (a broken `bad_tanh(tmp2)`) belongs to the node between its anchored neighbours."""
    ops = kernel[len("cpp_fused_"):].rsplit("_", 1)[0] if kernel and kernel.startswith("cpp_fused_") else ""
    in_kernel = [n for n in nodes if n["target"].split(".")[1] in ops] if ops else []
    statements, failing = _statements(cpp_lines, cpp_line - 1)
    if not in_kernel or failing < 0:
        return in_kernel
    anchors: dict[int, int] = {}
    at = 0
    for position, text in enumerate(statements):
        shown = _statement_ops(text)
        matching = [k for k in range(at, len(in_kernel)) if in_kernel[k]["target"].split(".")[1] in shown]
        fresh = [k for k in matching if k not in anchors.values()]
        if matching:
            anchors[position] = at = (fresh or matching)[0]
    if failing in anchors:
        return [in_kernel[anchors[failing]]]
    before = max((k for p, k in anchors.items() if p < failing), default=-1)
    after = min((k for p, k in anchors.items() if p > failing), default=len(in_kernel))
    between = [k for k in range(before + 1, after) if k not in anchors.values()] or list(range(before + 1, after))
    return [in_kernel[between[0] if between else max(before, 0)]]


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
        matched = _nodes_for(kernel, cpp_lines, d.line, nodes) if d.severity == "error" else []
        source = next((parse_source_ref(n["source"]) for n in matched if n["source"]), None)
        diagnostics.append(CompileDiagnostic(d.severity, d.message, d.file, d.line, d.column, oc_line, kernel or "",
                                             [n["name"] for n in matched], source))
    return CompileError(os.path.basename(os.path.normpath(graph_dir)), _command(text), diagnostics,
                        backend="inductor").to_json()


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
