"""Markdown and short-text renderings of index objects, shared by hover, code lens and inlay hints."""
from __future__ import annotations

from ..index import KernelRef
from ..model import FxNode, Graph, Kernel, SourceLocation
from .lookup import uri_of

FENCE_LANGUAGE = {"cpp": "cpp", "triton": "python", "python": "python"}
MAX_SOURCE_LINES = 60


def link(path: object, line: int, label: str | None = None) -> str:
    name = getattr(path, "name", None) or str(path).rsplit("/", 1)[-1]
    return f"[{label or f'{name}:{line}'}]({uri_of(path)}#L{line})"


def kernel_time(kernel: Kernel) -> str:
    if kernel.time_ms is None:
        return ""
    percent = f" ({kernel.percent:.1f}%)" if kernel.percent is not None else ""
    return f"{kernel.time_ms:.3f} ms{percent}"


def kernel_heading(ref: KernelRef) -> str:
    kernel = ref.kernel
    parts = [f"`{kernel.name}`", kernel.kind]
    if kernel_time(kernel):
        parts.append(kernel_time(kernel))
    return " · ".join(parts)


def kernel_block(ref: KernelRef, with_source: bool = True) -> str:
    kernel, graph = ref.kernel, ref.graph
    text = [f"#### {kernel_heading(ref)}",
            f"{link(graph.output_code, kernel.start_line)} — run `{ref.run.id}`, graph `{graph.id}`"]
    if kernel.nodes:
        text.append("nodes: " + ", ".join(f"`{n}`" for n in kernel.nodes))
    if with_source:
        lines = graph.kernel_source(kernel).splitlines()
        if len(lines) > MAX_SOURCE_LINES:
            lines = lines[:MAX_SOURCE_LINES] + [f"... ({len(lines) - MAX_SOURCE_LINES} more lines)"]
        fence = FENCE_LANGUAGE.get(kernel.language, "")
        text.append(f"```{fence}\n" + "\n".join(lines) + "\n```")
    return "\n\n".join(text)


def node_block(graph: Graph, node: FxNode) -> str:
    text = f"FX node `{node.name}` = `{node.target}`"
    if node.readable_line is not None:
        text += f" — {link(graph.readable, node.readable_line)}"
    if node.source is not None:
        text += "\n\n" + source_block(node.source)
    return text


def source_block(source: SourceLocation) -> str:
    where = link(source.file, source.line, f"{source.file.rsplit('/', 1)[-1]}:{source.line}")
    function = f" in `{source.function}`" if source.function else ""
    code = f"\n```python\n{source.code}\n```" if source.code else ""
    return f"source {where}{function}{code}"


def short_kernel_names(refs: list[KernelRef], limit: int = 2) -> str:
    names = []
    for ref in refs:
        if ref.kernel.name not in names:
            names.append(ref.kernel.name)
    shown = ", ".join(names[:limit])
    return shown + (" …" if len(names) > limit else "")


def count_label(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
