"""Hover: on a `def` → its kernels; on a source line → its generated lines; on a kernel line → FX node + source."""
from __future__ import annotations

import re
from typing import Any

from lsprotocol import types

from lsp_server.features.describe import (
    count_label,
    direction,
    eager_head,
    kernel_block,
    kernel_line,
    kernel_time,
    line_cost_text,
    link,
    newest_eager,
    node_block,
    node_split,
    short_kernel_names,
    notes_block,
    rank_note,
    source_block,
    trace_function_block,
)
from lsp_server.features.failsafe import failsafe
from lsp_server.features.function_kernels import function_kernels
from lsp_server.features.gpu_kernels import gpu_hover_block
from lsp_server.features.lookup import def_name_at, path_of, trace_functions_at
from lsp_server.features.ranks import ranks_hover_line
from lsp_server.features.source_lines import FileLines, file_lines
from lsp_server.features.why_text import dynamic_block, settings_block, symbol_block, why_block
from lsp_server.index import Index

WORD = re.compile(r"[A-Za-z_]\w*")


def hover_text(server: Any, index: Index, uri: str, line0: int, character: int = 0) -> str | None:
    path = path_of(uri)
    generated = index.generated_file(path)
    if generated is not None:
        symbol = symbol_at(generated.graph, generated.graph.code_line(line0 + 1), character)
        return symbol_block(symbol) if symbol is not None else generated_line_text(index, path, line0 + 1)
    if index.readable_graph(path) is not None:
        found = index.node_at_readable_line(path, line0 + 1)
        return node_block(*found) if found else None
    lines = file_lines(server, index, uri)
    span = lines.span_at(line0 + 1) if lines is not None else None
    function = span.name if span is not None else def_name_at(server, uri, line0)
    if function is not None:
        parts = []
        traced = trace_functions_at(index, path, function, line0 + 1)
        if traced:
            findings = [d for d in index.trace.findings_in(path) if d.function == function]
            parts.append(trace_function_block(traced, findings))
        owned = function_kernels(lines, span) if lines is not None and span is not None else None
        refs, graphs = (owned.refs, owned.graphs) if owned is not None else ([], [])
        label = span.qualname if span is not None else function
        eager = newest_eager(graphs)
        if eager is not None:
            parts.append(eager_head(label, eager, len(refs)))
        elif refs:
            split = node_split(graphs)
            parts.append(f"**Kernel Lens** — `{label}` compiled into {count_label(len(refs), 'kernel')}"
                         f" ({lines_label(sorted(owned.lines))}){rank_note(refs[0].run)}"
                         + (f" · {split}" if split else ""))
        if owned is not None and owned.via_calls:
            if not refs and eager is None:
                parts.append(f"**Kernel Lens** — `{label}`: its own lines became no kernels; its calls did")
            parts.append(via_calls_block(owned))
        if owned is not None and owned.unrecorded:
            parts.append(unrecorded_block(label, owned))
        notes = notes_block(graphs)
        if notes:
            parts.append(notes)
        # The sizes and settings a graph was compiled with qualify what the hover says it became: alone (a graph
        # whose kernel map is still being written) they would answer nothing.
        for block in (dynamic_block(graphs), settings_block(graphs)) if parts else ():
            if block:
                parts.append(block)
        if span is not None:
            parts += kernel_blocks(index, path, span, refs)
        if parts:
            return "\n\n".join(parts)
    return source_line_text(index, path, line0 + 1, lines)


def lines_label(lines: list[int]) -> str:
    """"line 12" / "lines 12, 14-15": the function's lines that became kernels."""
    runs: list[list[int]] = []
    for line in lines:
        if runs and line == runs[-1][-1] + 1:
            runs[-1].append(line)
        else:
            runs.append([line])
    text = ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"line{'s' if len(lines) > 1 else ''} {text}"


def via_calls_block(owned) -> str:
    """What the calls on a function's lines became, apart from its own kernels, with the lines called into."""
    callees = ", ".join(link(file, line, f"{file.rsplit('/', 1)[-1]}:{line}") + (f" `{fn}`" if fn else "")
                        for file, line, fn in owned.callee_lines[:8])
    more = f" … {len(owned.callee_lines) - 8} more" if len(owned.callee_lines) > 8 else ""
    names = "\n".join(f"- {kernel_line(ref)}" for ref in owned.via_calls[:MAX_KERNEL_SOURCES * 2])
    return (f"**Via calls: {count_label(len(owned.via_calls), 'kernel')}** (the code its lines call: "
            f"{callees}{more})\n{names}")


def unrecorded_block(label: str, owned) -> str:
    """A function whose calls went into graphs that kept no callers: what they became is unknown, not none."""
    return (f"**Kernel Lens** — `{label}` calls: not recorded in this run — what its calls became is unknown "
            f"({lines_label(owned.silent_calls)} became no kernel of its own): {unrecorded_why(owned.unrecorded)}")


def unrecorded_why(graphs: list) -> str:
    names = ", ".join(f"`{g.id}`" for g in graphs[:3]) + (" …" if len(graphs) > 3 else "")
    return (f"Inductor's debug files keep only each node's innermost frame (`# File:`), and no structured trace "
            f"of this process logged its kernels' stacks (graph {names}). Rerun with `TORCH_COMPILE_DEBUG=1` "
            "keeping `torch_compile_debug/tlparse/`, or with `TORCH_TRACE=./torch_trace`, to see them.")


def unrecorded_call(lines: FileLines | None, line: int) -> str | None:
    """A line of a function whose calls are unrecorded, whose call became no kernel of its own."""
    span = lines.owner(line) if lines is not None else None
    owned = function_kernels(lines, span) if span is not None else None
    if owned is None or not owned.unrecorded or line not in owned.silent_calls:
        return None
    return (f"**Kernel Lens** — line {line}: what its call became is not recorded in this run. "
            f"{unrecorded_why(owned.unrecorded)}")


# A function's hover shows the source of its first kernels only: fifty kernels' code is no hover to read, and its
# ~50 KB filled the pipe to the client, so the server waited for the editor to read it (lsp_bench).
MAX_KERNEL_SOURCES = 8


def kernel_blocks(index: Index, path: str, span, refs: list) -> list[str]:
    """Each kernel's section of a function's hover, rendered once per run view (its kernels never change)."""
    view = index.view_for_file(path)
    key = ("kernel_blocks", path, tuple(id(r.kernel) for r in refs))  # the same kernels: the same blocks
    blocks = view.memo.get(key) if view is not None else None
    if blocks is None:
        blocks = [kernel_block(ref) for ref in refs[:MAX_KERNEL_SOURCES]]
        if len(refs) > MAX_KERNEL_SOURCES:
            blocks.append(f"… and {count_label(len(refs) - MAX_KERNEL_SOURCES, 'more kernel')}:\n"
                          + "\n".join(f"- {kernel_line(ref)}" for ref in refs[MAX_KERNEL_SOURCES:]))
        if view is not None:
            view.memo[key] = blocks
    return blocks


def generated_line_text(index: Index, path: str, line: int) -> str | None:
    generated = index.generated_file(path)
    kernel = generated.kernel_at(line) if generated else None
    if generated is None or kernel is None:
        return None
    graph = generated.graph
    kernel_line = generated.line_nodes.get(line)
    names = kernel_line.nodes if kernel_line else kernel.nodes
    parts = [f"**Kernel Lens** — `{kernel.name}` ({kernel.kind}) in graph `{graph.id}`"]
    if kernel_line is None:
        parts.append(f"computes {', '.join(f'`{n}`' for n in kernel.nodes) or 'no mapped nodes'}")
    elif kernel_line.one_of:
        parts.append(f"computes one of: {', '.join(f'`{n}`' for n in names)} (the compiler's records do not say which)")
    for name in names:
        node = graph.nodes.get(name)
        if node is not None:
            parts.append(node_block(graph, node))
    scalar = not_vectorized_block(graph, kernel, _loop_lines(kernel, [line]))
    if scalar:
        parts.append(scalar)
    gpu = gpu_hover_block(kernel)  # a GPU run: what the Triton kernel compiled to, its autotuning
    if gpu:
        parts.append(gpu)
    return "\n\n".join(parts)


def not_vectorized_block(graph, kernel, lines: list[int]) -> str | None:
    """g++'s reasons for leaving scalar the innermost loops on these generated lines (vectorization.txt)."""
    found = [(n, r) for n in lines for r in graph.not_vectorized.get(n, [])]
    if not found:
        return None
    shown = "\n".join(f"- the loop at {link(graph.output_code, n, f'line {n}')}: {reason}" for n, reason in found[:6])
    more = f"\n- … {len(found) - 6} more in vectorization.txt" if len(found) > 6 else ""
    return (f"**Not vectorized** (`{kernel.name}` in graph `{graph.id}`, run `{graph.run_id}`; g++ "
            f"-fopt-info-vec-missed):\n{shown}{more}")


def symbol_at(graph, text: str, character: int):
    """The size symbol (symbols.json) whose name is the word at `character` of a generated line."""
    if not graph.symbols:
        return None
    for match in WORD.finditer(text):
        if match.start() <= character <= match.end():
            return next((s for s in graph.symbols if s.name == match.group()), None)
    return None


def source_line_text(index: Index, path: str, line: int, lines: FileLines | None = None) -> str | None:
    """What current line `line` became: the recorded line whose text it still is (the lines above may have moved
    it); a line whose text changed since the compile says its kernels are from the older text."""
    if lines is not None and line in lines.stale:
        old = lines.stale[line]
        text = lines.view.line_text.get((lines.file, old), "")
        hits = lines.view.by_source_line.get((lines.file, old), [])
        became = f" became {short_kernel_names([h.ref for h in hits], 4)}" if hits else " has answers"
        return (f"**Kernel Lens** — line {line} changed since the compile: its older version `{text}`{became} "
                f"(run `{lines.view.run.id}`{rank_note(lines.view.run)}); compile again for this text's kernels")
    recorded = line if lines is None else lines.to_recorded.get(line)
    if recorded is None:  # no node of its own: a call whose callee's nodes the run may not have linked to it
        return unrecorded_call(lines, line)
    hits = index.hits_at(path, recorded)
    why = why_block(index.why_at(path, recorded))
    calls = lines.view.by_caller_line.get((lines.file, recorded), []) if lines is not None else []
    if not hits:
        text = f"**Kernel Lens** — line {line}" if why or calls else None
        return "\n\n".join(p for p in (text, calls_block(calls), why) if p) or None
    view = lines.view if lines is not None else index.view_for_file(path)
    parts = [f"**Kernel Lens** — line {line} became {count_label(len(hits), 'kernel')}{rank_note(view.run)}"]
    share, ms = index.line_share(path, recorded), index.line_ms(path, recorded)
    if share:
        parts[0] += f" · {line_cost_text(share, ms)}"
    ranks = ranks_hover_line(index, view, path, recorded)  # what the job's other ranks made of it
    if ranks:
        parts.append(ranks)
    if calls:
        parts.append(calls_block(calls))
    for hit in hits:
        graph, kernel = hit.ref.graph, hit.ref.kernel
        code = "\n".join(f"{graph.code_line(n).strip()}" for n in hit.generated_lines[:8])
        links = ", ".join(link(graph.output_code, n) for n in hit.generated_lines[:8])
        timing = f", {kernel_time(kernel)}" if kernel_time(kernel) else ""
        label = f", {direction(graph)}" if direction(graph) else ""
        parts.append(f"`{kernel.name}` ({kernel.kind}{label}{timing}, nodes {', '.join(hit.nodes)}): {links}\n"
                     f"```{'cpp' if kernel.language == 'cpp' else 'python'}\n{code}\n```")
        scalar = not_vectorized_block(graph, kernel, _loop_lines(kernel, hit.generated_lines))
        if scalar:
            parts.append(scalar)
    if why:
        parts.append(why)
    first = hits[0].ref
    node = first.graph.nodes.get(hits[0].nodes[0]) if hits[0].nodes else None
    if node is not None and node.source is not None:
        parts.append(source_block(node.source))
    return "\n\n".join(parts)


def calls_block(calls: list) -> str:
    """The kernels of the code a call on this line went into (its callee's lines)."""
    if not calls:
        return ""
    refs = {(id(h.ref.graph), id(h.ref.kernel)): h.ref for h, _ in calls}
    callees = sorted({(frame.file, frame.line) for _, frame in calls})
    where = ", ".join(link(f, n, f"{f.rsplit('/', 1)[-1]}:{n}") for f, n in callees[:6])
    return (f"via calls: {count_label(len(refs), 'kernel')} · {short_kernel_names(list(refs.values()), 4)} "
            f"(from {where}{' …' if len(callees) > 6 else ''})")


def _loop_lines(kernel, lines: list[int]) -> list[int]:
    """The generated lines and the `for` lines enclosing them within the kernel (g++ reports loops there)."""
    return sorted(set(lines).union(*(kernel.loops_around(n) for n in lines)))


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @failsafe(server, "hover")
    def hover(params: types.HoverParams) -> types.Hover | None:
        text = hover_text(server, server.index, params.text_document.uri, params.position.line,
                          params.position.character)
        if text is None:
            return None
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text))
