"""Parses `profile.json` (per-kernel times of one graph, eager vs compiled)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import as_dict_list, as_float, as_int, as_str, read_json_object


@dataclass
class KernelTime:
    name: str
    kind: str
    calls: int
    total_ms: float
    percent: float


@dataclass
class CategoryTime:
    kind: str
    total_ms: float
    percent: float


@dataclass
class GraphProfile:
    path: Path
    graph_id: str
    eager_ms: float | None
    compiled_ms: float | None
    speedup: float | None
    kernels: list[KernelTime] = field(default_factory=list)
    categories: list[CategoryTime] = field(default_factory=list)
    device: str | None = None  # cuda | cpu | ...; None: profile.json (ours, CPU)
    busy_percent: float | None = None  # share of wall time the device was busy (`output_code.py -p`)
    profiled_ms: float | None = None  # one iteration under the profiler: kernel percents are of this


def parse_profile(path: Path) -> GraphProfile:
    data = read_json_object(path)
    kernels = [KernelTime(as_str(k.get("name")), as_str(k.get("kind")), as_int(k.get("calls")) or 0,
                          as_float(k.get("total_ms")) or 0.0, as_float(k.get("percent")) or 0.0)
               for k in as_dict_list(data.get("kernels")) if as_str(k.get("name"))]
    categories = [CategoryTime(as_str(c.get("kind")), as_float(c.get("total_ms")) or 0.0,
                               as_float(c.get("percent")) or 0.0)
                  for c in as_dict_list(data.get("categories"))]
    return GraphProfile(path, as_str(data.get("graph_id")), as_float(data.get("eager_ms")),
                        as_float(data.get("compiled_ms")), as_float(data.get("speedup")), kernels, categories,
                        profiled_ms=as_float(data.get("profiled_ms")))
