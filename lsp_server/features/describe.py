"""Markdown and short-text renderings of index objects, shared by hover, code lens and inlay hints."""
from __future__ import annotations

from lsp_server.features.lookup import uri_of
from lsp_server.index import FunctionGraph, KernelRef, function_label
from lsp_server.model import FxNode, Graph, Kernel, SourceLocation, TraceDiagnostic, TraceFunction

FENCE_LANGUAGE = {"cpp": "cpp", "triton": "python", "python": "python"}
MAX_SOURCE_LINES = 60


def link(path: object, line: int, label: str | None = None) -> str:
    name = getattr(path, "name", None) or str(path).rsplit("/", 1)[-1]
    return f"[{label or f'{name}:{line}'}]({uri_of(path)}#L{line})"


def format_ms(ms: float) -> str:
    """Milliseconds per iteration, in µs below 0.01 ms (GPU kernels of small graphs)."""
    return f"{ms * 1000:.2f} µs" if ms < 0.01 else f"{ms:.3f} ms"


def line_cost_text(share: float, ms: float | None) -> str:
    """A source line's cost in the words the profile view and the cost gutter use: its share of one profiled
    iteration (profile.json's profiled_ms) and its milliseconds per iteration."""
    return f"{share:.1f}% of the profiled iteration" + (f" · {format_ms(ms)} per iteration" if ms else "")


def kernel_time(kernel: Kernel) -> str:
    if kernel.time_ms is None:
        return ""
    percent = f" ({kernel.percent:.1f}%)" if kernel.percent is not None else ""
    if kernel.time_ms < 0.01:  # GPU kernels of small graphs take a few microseconds
        return f"{kernel.time_ms * 1000:.2f} µs{percent}"
    return f"{kernel.time_ms:.3f} ms{percent}"


def kernel_heading(ref: KernelRef) -> str:
    kernel = ref.kernel
    parts = [f"`{kernel.name}`", kernel.kind]
    if kernel_time(kernel):
        parts.append(kernel_time(kernel))
    return " · ".join(parts)


def direction(graph) -> str | None:
    """`forward` or `backward` for a training graph, else None (inference graphs need no label)."""
    return graph.direction if graph.direction in ("forward", "backward") else None


def rank_note(run) -> str:
    """" (rank 0 of 2)" after a run's name when it is a rank of a distributed job, else ""."""
    return f" ({run.rank_label})" if run.rank_label else ""


def kernel_block(ref: KernelRef, with_source: bool = True) -> str:
    kernel, graph = ref.kernel, ref.graph
    text = [f"#### {kernel_heading(ref)}",
            f"{link(graph.output_code, kernel.start_line)} — run `{ref.run.id}`{rank_note(ref.run)}, graph `{graph.id}`"
            + (f" ({direction(graph)})" if direction(graph) else "")]
    if kernel.nodes:
        text.append("nodes: " + ", ".join(f"`{n}`" for n in kernel.nodes))
    if kernel.args:
        text.append(kernel_arguments(kernel))
    if kernel.plans:
        text.append(kernel_plan(kernel))
    if with_source:
        lines = graph.kernel_source(kernel).splitlines()
        if len(lines) > MAX_SOURCE_LINES:
            lines = lines[:MAX_SOURCE_LINES] + [f"... ({len(lines) - MAX_SOURCE_LINES} more lines)"]
        fence = FENCE_LANGUAGE.get(kernel.language, "")
        text.append(f"```{fence}\n" + "\n".join(lines) + "\n```")
    return "\n\n".join(text)


MAX_ARGUMENTS = 8


def kernel_arguments(kernel: Kernel) -> str:
    """Its tensors' dtypes and shapes as they are in memory, and the dtype a half buffer is computed in (`did my
    bf16 stay bf16?`): `in_ptr0` in bfloat16[8192, 1024] (computed in float32) · `out_ptr0` out ..."""
    tensors = [a for a in kernel.args if a.role != "size"]
    shown = []
    for arg in tensors[:MAX_ARGUMENTS]:
        shape = f"[{', '.join(map(str, arg.shape))}]" if arg.shape is not None else ""
        computed = f" (computed in {arg.compute_dtype})" if arg.compute_dtype and arg.compute_dtype != arg.dtype else ""
        shown.append(f"`{arg.name}` {arg.role} {arg.dtype}{shape}{computed}")
    more = f" · … {len(tensors) - MAX_ARGUMENTS} more" if len(tensors) > MAX_ARGUMENTS else ""
    sizes = [a.name for a in kernel.args if a.role == "size"]
    text = "arguments: " + (" · ".join(shown) or "none") + more
    return text + (f" · sizes {', '.join(f'`{s}`' for s in sizes)}" if sizes else "")


def kernel_plan(kernel: Kernel) -> str:
    """Why the kernel's loops look as they do: each planning pass's choice and its reason (kernel_plans.json), and
    the run-time checks of its size variants."""
    generic, variants = kernel.plans[0], kernel.plans[1:]
    lines = []
    for d in generic.decisions:
        subject = f" ({d.subject})" if d.subject else ""
        reason = f" — {d.reason}" if d.reason else ""
        lines.append(f"- {d.pass_name}{subject}: {d.choice}{reason}")
    for variant in variants:
        lines.append(f"- size variant when {' && '.join(variant.assumptions) or 'always'}: {variant.strategy}"
                     + (f", streams {', '.join(variant.streamed)}" if variant.streamed else "")
                     + (f", prefetches rows for {variant.row_prefetch}" if variant.row_prefetch else ""))
    return "plan (why these loops):\n" + "\n".join(lines)


def kernel_line(ref: KernelRef) -> str:
    """A kernel in one line: its name linking to its code, kind and time."""
    time = f" · {kernel_time(ref.kernel)}" if kernel_time(ref.kernel) else ""
    return f"{link(ref.graph.output_code, ref.kernel.start_line, ref.kernel.name)} · {ref.kernel.kind}{time}"


def node_block(graph: Graph, node: FxNode) -> str:
    text = f"FX node `{node.name}` = `{node.target}`"
    if node.readable_line is not None:
        text += f" — {link(graph.node_file(node), node.readable_line)}"
    if node.source is not None:
        text += "\n\n" + source_block(node.source)
    return text


def source_block(source: SourceLocation) -> str:
    where = link(source.file, source.line, f"{source.file.rsplit('/', 1)[-1]}:{source.line}")
    function = f" in `{function_label(source.function)}`" if source.function else ""
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


MAX_ATEN_LINES = 12


def node_split(graphs: list[FunctionGraph]) -> str | None:
    """"5 nodes native, 2 ATen" over a function's graphs, where notes.txt explains the ATen calls (ours);
    None when every node has generated code or no compiler said why (Inductor's extern mm is by design)."""
    if not any(g.graph.notes.externs for g in graphs):
        return None
    native, aten = sum(len(g.native) for g in graphs), sum(len(g.aten) for g in graphs)
    return f"{count_label(native, 'node')} native, {aten} ATen" if aten else None


def newest_eager(graphs: list[FunctionGraph]) -> FunctionGraph | None:
    """The function's newest graph when it runs eagerly (so every later call does)."""
    return graphs[-1] if graphs and graphs[-1].eager is not None else None


def eager_head(function: str, newest: FunctionGraph, kernels: int) -> str:
    text = (f"**Kernel Lens** — `{function}` runs eagerly: its newest graph `{newest.graph.id}` has no generated "
            f"code ({newest.eager})")
    if kernels:
        text += f"\n\nAn older graph compiled it into {count_label(kernels, 'kernel')}:"
    return text


def notes_block(graphs: list[FunctionGraph]) -> str | None:
    """Hover section from notes.txt: the function's nodes that run as ATen calls and why, older eager graphs."""
    lines = [f"- graph `{g.graph.id}` runs eagerly: {g.eager}" for g in graphs[:-1] if g.eager is not None]
    for entry in graphs:
        for name in entry.aten:
            note = entry.graph.notes.extern_for(name)
            node = entry.graph.nodes.get(name)
            target = note.target if note is not None else (node.target if node is not None else "")
            why = f": {note.reason}" if note is not None and note.reason else ""
            where = (f" — {link(node.source.file, node.source.line, f'line {node.source.line}')}"
                     if node is not None and node.source is not None else "")
            lines.append(f"- `{name}` → ATen `{target}`{why}{where}")
    if not lines:
        return None
    more = [f"- … {len(lines) - MAX_ATEN_LINES} more in notes.txt"] if len(lines) > MAX_ATEN_LINES else []
    return "**Not compiled** (notes.txt):\n" + "\n".join(lines[:MAX_ATEN_LINES] + more)


def rank_label(rank: int | None) -> str:
    return "" if rank is None else f"rank {rank}"


def trace_lens_titles(functions: list[TraceFunction]) -> list[str]:
    """One title when every rank compiled the function alike, else one per rank."""
    if len({f.lens for f in functions}) == 1:
        ranks = [f.rank for f in functions if f.rank is not None]
        prefix = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: " if ranks else ""
        return [prefix + functions[0].lens]
    return [f"{rank_label(f.rank)}: {f.lens}" if f.rank is not None else f.lens for f in functions]


def trace_function_block(functions: list[TraceFunction], findings: list[TraceDiagnostic]) -> str:
    """Hover section: per rank, what the structured trace says about a function's compiles."""
    parts = []
    for f in functions:
        where = f" ({rank_label(f.rank)})" if f.rank is not None else ""
        figures = [count_label(f.frames, "frame") + " compiled", count_label(f.graphs, "graph"),
                   count_label(f.ops, "op"), count_label(f.guards, "guard")]
        if f.recompiles:
            figures.append(f"recompiled {f.recompiles}×")
        if f.graph_breaks:
            figures.append(count_label(f.graph_breaks, "graph break"))
        if f.failures:
            figures.append(count_label(f.failures, "failed compile"))
        figures.append(f"{f.compile_time_s:.2f} s compile")
        text = f"**Structured trace** — `{f.name}`{where}: " + " · ".join(figures)
        if f.failed_guards:
            text += "\n\nGuards that failed (recompile reasons):\n" + "\n".join(f"- `{g}`" for g in f.failed_guards)
        parts.append(text)
    notes = [d for d in findings if d.kind == "rank_divergence"]
    if notes:
        parts.append("\n".join(f"⚠ {d.message}" + (f" — {d.related[0].message}" if d.related else "")
                               for d in notes))
    return "\n\n".join(parts)
