"""`why.json`: the compiler's decisions about one graph's nodes (ATen calls, fusion refusals, scalar loops,
eager graphs), each with a reason code, words for people and an optional config fix. Unknown kinds are kept
(features skip them); malformed records are skipped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import as_dict_list, as_str, as_str_list, read_json_object

KINDS = ("aten_call", "not_fused", "not_vectorized", "eager_graph")


@dataclass(frozen=True)
class WhyFix:
    """A `compiler.config` setting whose change undoes the decision."""

    title: str
    setting: str
    value: object


@dataclass(frozen=True)
class WhyRecord:
    kind: str
    nodes: tuple[str, ...]
    reason: str
    message: str
    kernel: str | None = None
    fix: WhyFix | None = None
    related: tuple[str, ...] = ()
    origin: str = "why.json"  # or the file it was derived from (notes.txt, vectorization.txt, output_code.py)


@dataclass
class WhyFile:
    graph_id: str = ""
    records: list[WhyRecord] = field(default_factory=list)


def _fix(value: object) -> WhyFix | None:
    if not isinstance(value, dict) or not isinstance(value.get("setting"), str):
        return None
    if not isinstance(value.get("value"), (int, float, str, bool)):
        return None
    return WhyFix(as_str(value.get("title")), value["setting"], value["value"])


def parse_why_object(data: dict) -> WhyFile:
    out = WhyFile(as_str(data.get("graph_id")))
    for entry in as_dict_list(data.get("records")):
        kind, message = entry.get("kind"), entry.get("message")
        if not isinstance(kind, str) or not isinstance(message, str):
            continue
        kernel = entry.get("kernel")
        out.records.append(WhyRecord(kind, tuple(as_str_list(entry.get("nodes"))), as_str(entry.get("reason")),
                                     message, kernel if isinstance(kernel, str) else None, _fix(entry.get("fix")),
                                     tuple(as_str_list(entry.get("related")))))
    return out


def parse_why(path: Path) -> WhyFile:
    return parse_why_object(read_json_object(path))
