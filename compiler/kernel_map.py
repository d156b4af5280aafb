"""The compiler's side of `kernel_map.json` (docs/debug-directory.md): which output_code.py lines came
from which FX nodes, and which user source line each node came from."""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.codegen.wrapper import OutputCode
from compiler.graph_source import ReadableGraph

KERNEL_MAP_VERSION = 1


@dataclass
class KernelMap:
    graph_id: str
    status: str  # ok | compile_error | accuracy_error
    graph_kind: str = "inference"  # inference | forward | backward
    nodes: list[dict] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"version": KERNEL_MAP_VERSION, "graph_id": self.graph_id, "status": self.status,
                "graph_kind": self.graph_kind, "nodes": self.nodes, "kernels": self.kernels}

    def kernel_at(self, output_code_line: int) -> dict | None:
        for k in self.kernels:
            start, end = k["output_code_lines"]
            if start <= output_code_line <= end:
                return k
        return None

    def nodes_at(self, output_code_line: int) -> list[str]:
        k = self.kernel_at(output_code_line)
        if k is None:
            return []
        best: list[str] = []
        for entry in k["lines"]:  # the statement at or just before the line
            if entry["output_code_line"] <= output_code_line:
                best = entry["nodes"]
        return best or list(k["nodes"])

    def node(self, name: str) -> dict | None:
        return next((n for n in self.nodes if n["name"] == name), None)


def build_kernel_map(graph_id: str, readable: ReadableGraph, code: OutputCode, status: str = "ok",
                     graph_kind: str = "inference") -> KernelMap:
    nodes = []
    for name, line in readable.lines.items():
        src = readable.sources.get(name)
        nodes.append({"name": name, "target": readable.targets.get(name, ""), "readable_line": line,
                      "source": src.to_json() if src else None})
    kernels = []
    for k in code.kernels:
        kernels.append({"name": k.name, "kind": k.kind, "output_code_lines": [k.start, k.end],
                        "nodes": list(k.nodes),
                        "lines": [{"output_code_line": n, "nodes": list(ns)} for n, ns in k.lines]})
        if k.target:
            kernels[-1]["target"] = k.target
    return KernelMap(graph_id, status, graph_kind, nodes, kernels)
