"""Parses Inductor's `inductor_provenance_tracking_node_mappings.json`: kernel (and handle) → FX nodes."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import as_str_list, read_json_object

INDUCTOR_MAJORS = (1, 2)


@dataclass
class KernelProvenance:
    """`cppCodeToPost` entry: `kernel:handle` (older torch: plain `kernel`) → post-grad node names."""

    kernel: str
    handle: int | None
    nodes: list[str]


@dataclass
class ProvenanceMap:
    path: Path
    kernels: list[KernelProvenance]
    post_to_pre: dict[str, list[str]] = field(default_factory=dict)

    def nodes_of(self, kernel: str) -> list[str]:
        names: list[str] = []
        for entry in self.kernels:
            if entry.kernel == kernel:
                names.extend(n for n in entry.nodes if n not in names)
        return names


def split_handle(key: str) -> tuple[str, int | None]:
    name, _, handle = key.rpartition(":")
    if name and handle.isdigit():
        return name, int(handle)
    return key, None


def parse_provenance(path: Path) -> ProvenanceMap:
    """ParseError on bad JSON; the `version` key is optional here (the debug-dir copy lacks it; the
    structured-trace copy has Inductor's own version, 2.0 in torch 2.11-2.13, same keys as 1.0)."""
    data = read_json_object(path, require_version=False, majors=INDUCTOR_MAJORS)
    kernels = []
    for key_name in ("cppCodeToPost", "tritonCodeToPost", "kernelCodeToPost"):
        table = data.get(key_name)
        if isinstance(table, dict):
            for key, nodes in table.items():
                kernel, handle = split_handle(str(key))
                kernels.append(KernelProvenance(kernel, handle, as_str_list(nodes)))
    post_to_pre = {}
    table = data.get("postToPre")
    if isinstance(table, dict):
        post_to_pre = {str(k): as_str_list(v) for k, v in table.items()}
    return ProvenanceMap(path, kernels, post_to_pre)
