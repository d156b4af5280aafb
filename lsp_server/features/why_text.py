"""Markdown for the "why" hover sections: the decisions on a source line (why.json, notes.txt, g++, Inductor)
and the dynamic sizes of a function's graphs (symbols.json)."""
from __future__ import annotations

from lsp_server.index import FunctionGraph, WhyHit
from lsp_server.model import Graph, ShapeSymbol, WhyRecord

TITLES = {"aten_call": "ATen call", "not_fused": "not fused", "not_vectorized": "not vectorized",
          "eager_graph": "runs eagerly", "reused": "computed once"}
MAX_WHY_LINES = 8


def why_message(graph: Graph, record: WhyRecord) -> str:
    """The record's words; a `reused` record also says which statement the node it reuses comes from (the record
    names only the FX node: `_to_copy` alone does not say which of three `Linear` calls computes it)."""
    if record.kind != "reused" or len(record.nodes) < 2:
        return record.message
    kept = graph.nodes.get(record.nodes[1])
    if kept is None or kept.source is None or not kept.source.code:
        return record.message
    return f"{record.message}; `{kept.name}` is from `{kept.source.code.strip()}`"


def why_block(hits: list[WhyHit]) -> str | None:
    """`**Why**` and one bullet per decision on the line: the node, the words, the fix when there is one."""
    if not hits:
        return None
    lines = []
    for hit in hits[:MAX_WHY_LINES]:
        record = hit.record
        where = f" (`{record.kernel}`)" if record.kernel and record.kind != "aten_call" else ""
        fix = f" — quick fix: *{record.fix.title}*" if record.fix is not None and record.fix.title else ""
        words = why_message(hit.graph, record)
        lines.append(f"- {TITLES.get(record.kind, record.kind)}: `{hit.node}`{where} {words}{fix}")
    if len(hits) > MAX_WHY_LINES:
        lines.append(f"- … {len(hits) - MAX_WHY_LINES} more")
    sources = sorted({h.record.origin for h in hits})
    return f"**Why** ({', '.join(sources)}):\n" + "\n".join(lines)


def symbol_line(symbol: ShapeSymbol) -> str:
    hint = f" (traced with {symbol.hint})" if symbol.hint is not None else ""
    return f"{symbol.described} is dynamic: `{symbol.name}` ∈ {symbol.range_text}{hint}"


def symbol_block(symbol: ShapeSymbol) -> str:
    """Hover of a size symbol in generated code."""
    text = [f"**Kernel Lens** — size symbol `{symbol.name}`: {symbol_line(symbol)}"]
    if symbol.source:
        text.append(f"read by Dynamo at `{symbol.source}`")
    if symbol.guards:
        text.append("guards: " + ", ".join(f"`{g}`" for g in symbol.guards[:6]))
    return "\n\n".join(text)


def dynamic_block(graphs: list[FunctionGraph]) -> str | None:
    """The function's dynamic sizes, once per symbol source (the newest graph's range wins)."""
    seen: dict[str, ShapeSymbol] = {}
    for entry in graphs:
        for symbol in entry.graph.symbols:
            seen[symbol.source or symbol.name] = symbol
    if not seen:
        return None
    return "**Dynamic shapes** (symbols.json):\n" + "\n".join(f"- {symbol_line(s)}" for s in seen.values())


def settings_block(graphs: list[FunctionGraph]) -> str | None:
    """The compiler.config settings not at their default when the function's graphs were compiled (why.json)."""
    seen: dict[str, object] = {}
    for entry in graphs:
        seen.update(entry.graph.config)  # the newest graph's value wins
    if not seen:
        return None
    return "**Settings in force** (why.json):\n" + "\n".join(f"- `compiler.config.{name} = {value!r}`"
                                                             for name, value in sorted(seen.items()))
