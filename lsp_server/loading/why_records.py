"""One graph's "why" records, whatever wrote them: our `why.json` (else `notes.txt`), g++'s scalar loops from
`vectorization.txt`, and real Inductor's extern kernels (its output_code.py says which nodes call ATen) and
kernels that read another kernel's buffer (ir_post_fusion.txt with output_code.py's launches)."""
from __future__ import annotations

import re

from lens_format.notes import GraphNotes
from lens_format.why import WhyFile, WhyRecord
from lsp_server.model import Graph
from lsp_server.parsers.ir_post_fusion import IrGraph


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
                                 f"`{kernel.name}` (graph `{graph.id}`, run `{graph.run_id}`) scalar: "
                                 f"{'; '.join(reasons)}", kernel.name,
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


def from_inductor_fusion(graph: Graph, ir: IrGraph | None) -> list[WhyRecord]:
    """Real Inductor: a kernel that reads, from memory, a buffer another kernel wrote. ir_post_fusion.txt says which
    scheduler node reads which node's buffer and how each iterates; output_code.py's launches say whether the
    two ended up in different kernels (the C++ backend fuses some of them after that file is written)."""
    if ir is None:
        return []
    by_buffer = {}  # buffer -> the first kernel whose launch names it: the one writing it
    for kernel in sorted(graph.kernels, key=lambda k: min(k.launch_lines or [k.start_line])):
        for line in kernel.launch_lines or ([kernel.start_line] if kernel.kind == "extern" else []):
            for name in re.findall(r"\bbuf\d+\b", graph.code_line(line)):
                by_buffer.setdefault(name, kernel)
    writer = {b: node for node in ir.nodes for b in node.writes}
    out, seen = [], set()
    for node in ir.nodes:
        kernel = by_buffer.get(node.writes[0]) if node.writes else None
        if kernel is None or kernel.kind == "extern" or not kernel.nodes:
            continue
        for buffer in node.reads:
            producer, source = writer.get(buffer), by_buffer.get(buffer)
            if producer is None or source is None or source is kernel or (kernel.name, source.name) in seen:
                continue
            seen.add((kernel.name, source.name))
            if producer.extern_kernel:
                message = f"reads `{buffer}` from memory: the extern kernel `{producer.extern_kernel}` writes it"
            else:
                message = (f"did not join `{source.name}`'s kernel: reads its `{buffer}` from memory (ir_post_fusion"
                           f".txt: `{producer.name}` iterates {producer.iteration or '?'}, `{node.name}` "
                           f"{node.iteration or '?'})")
            out.append(WhyRecord("not_fused", (kernel.nodes[0],), "inductor_separate_kernels", message, kernel.name,
                                 origin="ir_post_fusion.txt"))
    return out


def graph_why(graph: Graph, why: WhyFile | None, ours: bool, ir: IrGraph | None = None) -> list[WhyRecord]:
    records = list(why.records) if why is not None else from_notes(graph.notes)
    if not ours:
        records += from_inductor_externs(graph) + from_inductor_fusion(graph, ir)
    return records + from_vectorization(graph)
