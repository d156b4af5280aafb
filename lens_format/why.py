"""`why.json`: the compiler's decisions about one graph's nodes (ATen calls, fusion refusals, scalar loops,
eager graphs), each with a reason code, words for people and an optional `compiler.config` fix. Readers keep
kinds they do not know (features skip them) and skip malformed records."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import as_dict_list, as_str, as_str_list, read_json_object

VERSION = 1
KINDS = ("aten_call", "not_fused", "not_vectorized", "eager_graph", "reused")


@dataclass(frozen=True)
class WhyFix:
    """A `compiler.config` setting whose change undoes the decision."""

    title: str
    setting: str
    value: object  # int | float | str | bool

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "setting": self.setting, "value": self.value}

    @classmethod
    def from_json(cls, value: object) -> WhyFix | None:
        if not isinstance(value, dict) or not isinstance(value.get("setting"), str):
            return None
        if not isinstance(value.get("value"), (int, float, str, bool)):
            return None
        return cls(as_str(value.get("title")), value["setting"], value["value"])


@dataclass(frozen=True)
class WhyRecord:
    kind: str  # aten_call | not_fused | not_vectorized | eager_graph | reused (readers keep others)
    nodes: tuple[str, ...]  # FX nodes; the first is the one whose source line shows the record
    reason: str  # a code a tool may act on
    message: str  # the same in words
    kernel: str | None = None  # the kernel holding nodes[0]
    fix: WhyFix | None = None
    related: tuple[str, ...] = ()  # other nodes the message names
    origin: str = "why.json"  # a reader's note: the file it came from (notes.txt, vectorization.txt...); not written

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "nodes": list(self.nodes), "kernel": self.kernel,
                                "reason": self.reason, "message": self.message,
                                "fix": self.fix.to_json() if self.fix else None}
        if self.related:
            data["related"] = list(self.related)
        return data

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WhyRecord | None:
        """None for a record without a kind or a message."""
        kind, message, kernel = d.get("kind"), d.get("message"), d.get("kernel")
        if not isinstance(kind, str) or not isinstance(message, str):
            return None
        return cls(kind, tuple(as_str_list(d.get("nodes"))), as_str(d.get("reason")), message,
                   kernel if isinstance(kernel, str) else None, WhyFix.from_json(d.get("fix")),
                   tuple(as_str_list(d.get("related"))))


@dataclass
class WhyFile:
    graph_id: str = ""
    records: list[WhyRecord] = field(default_factory=list)
    # the `compiler.config` settings that differ from their defaults when the graph was compiled ("cpp.simdlen")
    config: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": VERSION, "graph_id": self.graph_id,
                                "records": [r.to_json() for r in self.records]}
        if self.config:
            data["config"] = dict(sorted(self.config.items()))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WhyFile:
        found = (WhyRecord.from_json(d) for d in as_dict_list(data.get("records")))
        config = data.get("config")
        settings = {k: v for k, v in config.items() if isinstance(k, str)} if isinstance(config, dict) else {}
        return cls(as_str(data.get("graph_id")), [r for r in found if r is not None], settings)


def read_why(path: Path) -> WhyFile:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not why.json."""
    return WhyFile.from_json(read_json_object(path))
