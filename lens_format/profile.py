"""`profile.json`: one graph's eager vs compiled time and per-kernel times (ms per iteration). The compiler's
profiling writes a `GraphProfile`'s `to_json`; the server also fills one from real Inductor's `output_code.py -p`
(`device`, `busy_percent`, which profile.json never holds)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import as_dict_list, as_float, as_int, as_str, read_json_object

VERSION = 1


@dataclass
class KernelTime:
    name: str
    kind: str
    calls: int  # per iteration
    total_ms: float  # per iteration, summed over its calls
    percent: float  # of the graph's profiled_ms
    self_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "calls": self.calls, "total_ms": self.total_ms,
                "self_ms": self.self_ms, "percent": self.percent}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KernelTime:
        return cls(as_str(d.get("name")), as_str(d.get("kind")), as_int(d.get("calls")) or 0,
                   as_float(d.get("total_ms")) or 0.0, as_float(d.get("percent")) or 0.0, as_float(d.get("self_ms")))


@dataclass
class CategoryTime:
    kind: str
    total_ms: float
    percent: float

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "total_ms": self.total_ms, "percent": self.percent}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CategoryTime:
        return cls(as_str(d.get("kind")), as_float(d.get("total_ms")) or 0.0, as_float(d.get("percent")) or 0.0)


@dataclass
class EagerOp:
    """An ATen op of the eager run under the profiler."""

    name: str
    calls: int
    total_ms: float
    self_ms: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "calls": self.calls, "total_ms": self.total_ms, "self_ms": self.self_ms}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EagerOp:
        return cls(as_str(d.get("name")), as_int(d.get("calls")) or 0, as_float(d.get("total_ms")) or 0.0,
                   as_float(d.get("self_ms")) or 0.0)


@dataclass
class GraphProfile:
    graph_id: str
    eager_ms: float | None = None  # median wall time per call without the profiler
    compiled_ms: float | None = None
    speedup: float | None = None  # None: eager_ms / compiled_ms where both are known
    iters: int | None = None
    profiled_ms: float | None = None  # one iteration under the profiler: kernel percents are of this
    kernels: list[KernelTime] = field(default_factory=list)
    categories: list[CategoryTime] = field(default_factory=list)
    eager_ops: list[EagerOp] = field(default_factory=list)
    device: str | None = None  # cuda | cpu | ...; None: profile.json (ours, CPU)
    busy_percent: float | None = None  # share of wall time the device was busy (`output_code.py -p`)
    path: Path | None = field(default=None, compare=False)  # where it was read from

    def ratio(self) -> float | None:
        if self.speedup is not None:
            return self.speedup
        return self.eager_ms / self.compiled_ms if self.eager_ms and self.compiled_ms else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": VERSION, "graph_id": self.graph_id, "eager_ms": self.eager_ms,
                                "compiled_ms": self.compiled_ms, "iters": self.iters, "profiled_ms": self.profiled_ms,
                                "kernels": [k.to_json() for k in self.kernels],
                                "categories": [c.to_json() for c in self.categories],
                                "eager_ops": [e.to_json() for e in self.eager_ops], "speedup": self.ratio()}
        for key in ("device", "busy_percent"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | None = None) -> GraphProfile:
        device = data.get("device")
        return cls(as_str(data.get("graph_id")), as_float(data.get("eager_ms")), as_float(data.get("compiled_ms")),
                   as_float(data.get("speedup")), as_int(data.get("iters")), as_float(data.get("profiled_ms")),
                   [KernelTime.from_json(k) for k in as_dict_list(data.get("kernels")) if as_str(k.get("name"))],
                   [CategoryTime.from_json(c) for c in as_dict_list(data.get("categories"))],
                   [EagerOp.from_json(e) for e in as_dict_list(data.get("eager_ops")) if as_str(e.get("name"))],
                   device if isinstance(device, str) else None, as_float(data.get("busy_percent")), path)

    def kernel_ms(self) -> dict[str, float]:
        """Kernel name -> its total ms per iteration."""
        return {k.name: k.total_ms for k in self.kernels}


def read_profile(path: Path) -> GraphProfile:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not profile.json."""
    return GraphProfile.from_json(read_json_object(path), path)
