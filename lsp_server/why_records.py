"""One graph's "why" records, whatever wrote them: our `why.json` (else `notes.txt`), g++'s scalar loops from
`vectorization.txt`, and real Inductor's extern kernels (its output_code.py says which nodes call ATen)."""
from __future__ import annotations

from .model import Graph
from .parsers.notes import GraphNotes
from .parsers.why import WhyFile, WhyRecord


def from_notes(notes: GraphNotes) -> list[WhyRecord]:
    """notes.txt's ATen fallbacks and eager graph, for runs written before why.json."""
    out = [WhyRecord("aten_call", (n.node,), "", f"runs as an ATen call ({n.target})" + (f": {n.reason}" if n.reason
                                                                                       else ""), origin="notes.txt")
           for n in notes.externs]
    if notes.eager is not None:
        out.append(WhyRecord("eager_graph", (), "", f"runs eagerly (no generated code): {notes.eager.reason}",
                             origin="notes.txt"))
    return out


def from_vectorization(graph: Graph) -> list[WhyRecord]:
    """g++'s reasons for leaving scalar a loop the compiler asked to vectorize (`omp simd` above it; outer loops
    g++ never vectorizes are not news), on the nodes of the kernel lines inside the loop."""
    out = []
    for line, reasons in sorted(graph.not_vectorized.items()):
        kernel = next((k for k in graph.kernels if k.start_line <= line <= k.end_line), None)
        if kernel is None or "simd" not in graph.code_line(line - 1):
            continue
        body = _loop_body(graph, line, kernel.end_line)
        nodes = [n for kl in kernel.lines if kl.line in body for n in kl.nodes] or kernel.nodes[:1]
        unique = tuple(dict.fromkeys(nodes))
        if unique:
            out.append(WhyRecord("not_vectorized", unique, "gcc_missed", f"g++ left the loop at line {line} of "
                                 f"`{kernel.name}` scalar: {'; '.join(reasons)}", kernel.name,
                                 origin="vectorization.txt"))
    return out


def _loop_body(graph: Graph, line: int, last: int) -> range:
    """The lines of the `for` at `line` up to its closing brace (the line alone when it has no block)."""
    depth = 0
    for number in range(line, last + 1):
        text = graph.code_line(number)
        depth += text.count("{") - text.count("}")
        if depth <= 0 and number > line:
            return range(line, number + 1)
    return range(line, last + 1)


def from_inductor_externs(graph: Graph) -> list[WhyRecord]:
    """Real Inductor: each extern kernel call (mm, convolution...) is a node left to ATen by Inductor."""
    return [WhyRecord("aten_call", (k.nodes[0],), "inductor_extern", f"Inductor runs it as an ATen call "
                      f"(`{k.name}`): an extern kernel, not generated code", k.name, origin="output_code.py")
            for k in graph.kernels if k.kind == "extern" and k.nodes]


def graph_why(graph: Graph, why: WhyFile | None, ours: bool) -> list[WhyRecord]:
    records = list(why.records) if why is not None else from_notes(graph.notes)
    if not ours:
        records += from_inductor_externs(graph)
    return records + from_vectorization(graph)
