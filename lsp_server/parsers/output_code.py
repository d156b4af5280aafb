"""Parses `output_code.py` (ours and real Inductor's): kernel sources, FX-line comments, kernel launches.

Recognises C++ kernels (`async_compile.cpp_pybinding`/`cpp`), Triton kernels (`async_compile.triton`),
and launches in `call()` with their `# [Provenance debug handles]` and source-node comments.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lsp_server.parsers.fx_graph_readable import call_args, clean_target

# `name = async_compile.cpp_pybinding([...], r'''` / `.triton('name', '''`; ours: any `name = f(..., r'''`
KERNEL_START = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<call>[\w.]+)\((?P<rest>.*)$")
KERNEL_CALLS = ("async_compile.cpp_pybinding", "async_compile.cpp", "async_compile.triton")
KERNEL_END = re.compile(r"^\s*'''\s*(\)|,)")
FX_LINE_COMMENT = re.compile(r"//\s*Corresponding FX code line:\s*(?P<fx>\d+)")
# `# Topologically Sorted Source Nodes: [a, b], Original ATen: [aten.neg]`; older: `# Source Nodes: [...]`
SOURCE_NODES = re.compile(r"^\s*# (?:Topologically Sorted )?Source Nodes: \[(?P<nodes>[^\]]*)\]"
                          r"(?:, Original ATen: \[(?P<aten>[^\]]*)\])?")
PROVENANCE = re.compile(r"^\s*# \[Provenance debug handles\] (?P<kernel>[\w.]+)(?::(?P<handle>\d+))?")
NODE_TO_ATEN = re.compile(r"^\s*#\s+(?P<node>\w+) => (?P<aten>[\w, ]+)$")
CALL_DEF = re.compile(r"^\s*def call\(")
MAX_LINES_TO_LAUNCH = 5
EXTERN_PREFIXES = ("extern_kernels.", "torch.ops.")  # calls of ATen's own kernels: extern and fallback
LAUNCH = re.compile(r"^\s*(?P<callee>extern_kernels\.\w+|[A-Za-z_]\w*)(?:\.run)?\(")
# A fallback kernel: an ATen op Inductor calls as it is (`buf1 = torch.ops.aten._scaled_dot_product_..._cpu.default(`)
FALLBACK = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*=\s*)?(?P<callee>torch\.ops\.\w+\.\w+\.\w+)\(")
# `#   %sub_tensor : Tensor "f32[...]"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (...` in
# a kernel's `# Graph fragment:` comment: a post-grad node it computes (one a post-grad pass made is in no other file)
FRAGMENT_NODE = re.compile(r"^#\s+%(?P<name>\w+) : .*?= call_function\[target=(?P<target>[^\]]+)\](?P<call>.*)$")
CPP_FOR = re.compile(r"^for\s*\(")
BRACE = re.compile(r"[{}]")


@dataclass
class FxLineMark:
    """A `// Corresponding FX code line: N` comment: the statement line it annotates and N."""

    comment_line: int
    statement_line: int
    fx_line: int


@dataclass(frozen=True)
class FragmentNode:
    """A post-grad node of a kernel's `# Graph fragment:` comment: its name, target and what it reads."""

    name: str
    target: str
    args: tuple[str, ...]


@dataclass
class CodeKernel:
    name: str
    flavor: str  # cpp | triton
    start_line: int
    end_line: int
    source_nodes: list[str] = field(default_factory=list)
    original_aten: list[str] = field(default_factory=list)
    fx_marks: list[FxLineMark] = field(default_factory=list)
    fragment: list[FragmentNode] = field(default_factory=list)  # Triton's: the post-grad nodes it computes


@dataclass(frozen=True)
class CodeLoop:
    """A C++ `for` loop: its header line, the line opening its body's `{` and the line closing it (1-based)."""

    header: int
    opened: int
    last: int


@dataclass
class KernelLaunch:
    callee: str
    line: int
    handle: int | None = None
    source_nodes: list[str] = field(default_factory=list)


@dataclass
class OutputCode:
    path: Path
    lines: list[str]
    kernels: list[CodeKernel]
    launches: list[KernelLaunch]
    call_line: int | None = None


def parse_output_code(path: Path) -> OutputCode:
    """Never raises on content: unknown lines are skipped, an unterminated kernel ends at end of file."""
    return parse_output_code_text(path, path.read_text(encoding="utf-8", errors="replace"))


def split_list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def parse_output_code_text(path: Path, text: str) -> OutputCode:
    lines = text.splitlines()
    kernels: list[CodeKernel] = []
    launches: list[KernelLaunch] = []
    current: CodeKernel | None = None
    pending_nodes: tuple[list[str], list[str]] = ([], [])
    pending_marks: list[tuple[int, int]] = []
    fragment: list[FragmentNode] = []
    pending_handle: tuple[str, int | None] | None = None
    call_line = None
    handle_wait = 0
    known: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if current is not None:
            if KERNEL_END.match(line):
                current.end_line, current = number, None
                continue
            mark = FX_LINE_COMMENT.search(line)
            if mark:
                pending_marks.append((number, int(mark["fx"])))
            elif line.strip() and pending_marks:
                current.fx_marks.extend(FxLineMark(c, number, fx) for c, fx in pending_marks)
                pending_marks = []
            continue
        start = KERNEL_START.match(line)
        if start and (start["call"] in KERNEL_CALLS or "'''" in start["rest"]):
            current = CodeKernel(start["name"], "triton" if "triton" in start["call"] else "cpp",
                                 number, len(lines), *pending_nodes, fragment=fragment)
            kernels.append(current)
            known.add(current.name)
            pending_nodes, pending_marks, fragment = ([], []), [], []
            continue
        nodes = SOURCE_NODES.match(line)
        if nodes:
            pending_nodes, fragment = (split_list(nodes["nodes"]), split_list(nodes["aten"])), []
            continue
        node = FRAGMENT_NODE.match(line) if call_line is None else None
        if node:
            fragment.append(FragmentNode(node["name"], clean_target(node["target"]), tuple(call_args(node["call"]))))
            continue
        provenance = PROVENANCE.match(line)
        if provenance:
            handle = provenance["handle"]
            pending_handle, handle_wait = (provenance["kernel"], int(handle) if handle else None), 0
            continue
        if CALL_DEF.match(line):
            call_line = number
            continue
        if call_line is None or not line.strip() or line.lstrip().startswith("#"):
            continue
        launch = FALLBACK.match(line) or LAUNCH.match(line)
        callee = launch["callee"] if launch else None
        if pending_handle is not None and callee == pending_handle[0]:
            launches.append(KernelLaunch(callee, number, pending_handle[1], pending_nodes[0]))
            pending_handle, pending_nodes = None, ([], [])
        elif callee is not None and (callee in known or callee.startswith(EXTERN_PREFIXES)):
            launches.append(KernelLaunch(callee, number, None, pending_nodes[0]))
            pending_nodes = ([], [])
        elif pending_handle is not None:
            handle_wait += 1  # e.g. `stream0 = get_raw_stream(0)` between the comment and the launch
            if handle_wait > MAX_LINES_TO_LAUNCH:
                pending_handle, handle_wait = None, 0
    return OutputCode(path, lines, kernels, launches, call_line)


def cpp_loops(lines: list[str], start: int, end: int) -> list[CodeLoop]:
    """The braced `for` loops of the C++ on lines start..end (1-based), matched by braces (not those of `//`
    comments): a header's `{` may open on the next line; a loop of one statement without braces has no body lines
    and is left out. The one brace walk: the hover's loops and the statement data flow's (cpp_dataflow) both."""
    loops: list[CodeLoop] = []
    blocks: list[tuple[int | None, int]] = []  # each open `{`: the loop header owning it (None: no loop's), its line
    header: int | None = None  # a `for` line whose `{` has not opened yet
    for number in range(max(start, 1), min(end, len(lines)) + 1):
        text = lines[number - 1].split("//", 1)[0].strip()
        if header is not None and not text.startswith("{"):
            header = None
        if CPP_FOR.match(text):
            header = number
        for brace in BRACE.findall(text):
            if brace == "{":
                blocks.append((header, number))
                header = None
            elif blocks:
                owner, opened = blocks.pop()
                if owner is not None:
                    loops.append(CodeLoop(owner, opened, number))
    return loops
