"""`kernel_plans.json`: each generated kernel's plan as the compiler's planning passes left it (compiler/codegen/
plan_passes.py): its strategy, outer loops, what streams or is prefetched, and every decision with its reason, so
a reader can answer "why is this loop not vectorized / this store not streamed". Readers skip malformed records."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import as_dict_list, as_str, as_str_list, read_json_object

VERSION = 1


@dataclass(frozen=True)
class PlanDecision:
    """One choice of one planning pass: `subject` the node it is about ('' for the whole kernel)."""

    pass_name: str  # "streaming", "row prefetch", "vectorize", ...
    subject: str
    choice: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_name, "subject": self.subject, "choice": self.choice, "reason": self.reason}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PlanDecision | None:
        """None without a pass or a choice."""
        if not isinstance(d.get("pass"), str) or not isinstance(d.get("choice"), str):
            return None
        return cls(d["pass"], as_str(d.get("subject")), d["choice"], as_str(d.get("reason")))


@dataclass(frozen=True)
class KernelPlanRecord:
    kernel: str
    strategy: str  # column | total | nest
    loops: tuple[str, ...] = ()  # the outer loops' sizes (a size symbol's expression as text)
    parallel: bool = False  # the outer loop runs on threads
    streamed: tuple[str, ...] = ()  # nodes whose stores stream
    row_prefetch: str = ""  # the node whose pass asks for the next row ('' for none)
    deferred: str = ""  # the node whose output pass runs a row late ('' for none)
    size_variant: bool = False  # planned for a size variant (its `assumptions`: the run-time checks)
    assumptions: tuple[str, ...] = ()
    decisions: tuple[PlanDecision, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "strategy": self.strategy, "loops": list(self.loops),
                "parallel": self.parallel, "streamed": list(self.streamed), "row_prefetch": self.row_prefetch,
                "deferred": self.deferred, "size_variant": self.size_variant, "assumptions": list(self.assumptions),
                "decisions": [d.to_json() for d in self.decisions]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KernelPlanRecord | None:
        """None without a kernel name."""
        if not isinstance(d.get("kernel"), str):
            return None
        found = (PlanDecision.from_json(x) for x in as_dict_list(d.get("decisions")))
        return cls(d["kernel"], as_str(d.get("strategy")), tuple(as_str_list(d.get("loops"))),
                   d.get("parallel") is True, tuple(as_str_list(d.get("streamed"))), as_str(d.get("row_prefetch")),
                   as_str(d.get("deferred")), d.get("size_variant") is True, tuple(as_str_list(d.get("assumptions"))),
                   tuple(x for x in found if x is not None))


@dataclass
class KernelPlansFile:
    graph_id: str = ""
    kernels: list[KernelPlanRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "graph_id": self.graph_id, "kernels": [k.to_json() for k in self.kernels]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelPlansFile:
        found = (KernelPlanRecord.from_json(d) for d in as_dict_list(data.get("kernels")))
        return cls(as_str(data.get("graph_id")), [k for k in found if k is not None])

    def plans_of(self, kernel: str) -> list[KernelPlanRecord]:
        """The kernel's plans: its generic one first, then those of its size variants."""
        return [k for k in self.kernels if k.kernel == kernel]


def read_kernel_plans(path: Path) -> KernelPlansFile:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not kernel_plans.json."""
    return KernelPlansFile.from_json(read_json_object(path))
