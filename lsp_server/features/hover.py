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
    notes_block,
    source_block,
    trace_function_block,
)
from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import def_name_at, path_of, trace_functions_at
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
    function = def_name_at(server, uri, line0)
    if function is not None:
        parts = []
        traced = trace_functions_at(index, path, function, line0 + 1)
        if traced:
            findings = [d for d in index.trace.findings_in(path) if d.function == function]
            parts.append(trace_function_block(traced, findings))
        refs = index.kernels_of_function(path, function)
        graphs = index.graphs_of_function(path, function)
        eager = newest_eager(graphs)
        if eager is not None:
            parts.append(eager_head(function, eager, len(refs)))
        elif refs:
            split = node_split(graphs)
            parts.append(f"**Kernel Lens** — `{function}` compiled into {count_label(len(refs), 'kernel')}"
                         + (f" · {split}" if split else ""))
        notes = notes_block(graphs)
        if notes:
            parts.append(notes)
        # The sizes and settings a graph was compiled with qualify what the hover says it became: alone (a graph
        # whose kernel map is still being written) they would answer nothing.
        for block in (dynamic_block(graphs), settings_block(graphs)) if parts else ():
            if block:
                parts.append(block)
        parts += kernel_blocks(index, path, function, refs)
        if parts:
            return "\n\n".join(parts)
    return source_line_text(index, path, line0 + 1)


# A function's hover shows the source of its first kernels only: fifty kernels' code is no hover to read, and its
# ~50 KB filled the pipe to the client, so the server waited for the editor to read it (lsp_bench).
MAX_KERNEL_SOURCES = 8


def kernel_blocks(index: Index, path: str, function: str, refs: list) -> list[str]:
    """Each kernel's section of a function's hover, rendered once per run view (its kernels never change)."""
    view = index.view_for_file(path)
    key = ("kernel_blocks", path, function)
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
    for name in names:
        node = graph.nodes.get(name)
        if node is not None:
            parts.append(node_block(graph, node))
    scalar = not_vectorized_block(graph, kernel, [line])
    if scalar:
        parts.append(scalar)
    return "\n\n".join(parts)


def not_vectorized_block(graph, kernel, lines: list[int]) -> str | None:
    """g++'s reasons for leaving loops scalar on these generated lines (from vectorization.txt)."""
    found = [(n, r) for n in lines for r in graph.not_vectorized.get(n, [])]
    if not found:
        return None
    shown = "\n".join(f"- line {n}: {reason}" for n, reason in found[:6])
    more = f"\n- … {len(found) - 6} more in vectorization.txt" if len(found) > 6 else ""
    return f"**Not vectorized** (`{kernel.name}`, g++ -fopt-info-vec-missed):\n{shown}{more}"


def symbol_at(graph, text: str, character: int):
    """The size symbol (symbols.json) whose name is the word at `character` of a generated line."""
    if not graph.symbols:
        return None
    for match in WORD.finditer(text):
        if match.start() <= character <= match.end():
            return next((s for s in graph.symbols if s.name == match.group()), None)
    return None


def source_line_text(index: Index, path: str, line: int) -> str | None:
    hits = index.hits_at(path, line)
    why = why_block(index.why_at(path, line))
    if not hits:
        return f"**Kernel Lens** — line {line}\n\n{why}" if why else None
    parts = [f"**Kernel Lens** — line {line} became {count_label(len(hits), 'kernel')}"]
    share, ms = index.line_share(path, line), index.line_ms(path, line)
    if share:
        parts[0] += f" · {line_cost_text(share, ms)}"
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
