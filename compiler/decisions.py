"""The compiler's answers to "why": a node left to ATen, a node that did not join its neighbour's kernel, a loop
left scalar, a graph run eagerly. Stages report a decision with one call where they make it; the frontend
collects one graph's records and writes them as `why.json` (docs/debug-directory.md)."""
from __future__ import annotations

import builtins
import functools
import os
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterable

from compiler import config
from lens_format import why as why_format
from lens_format.kernel_map import MappedKernel

VERSION = why_format.VERSION
# frozen convolutions (graph_passes/conv_onednn.py): machine/conv_packed.py's ops
CONVOLUTION_TARGETS = ("lens.conv2d_onednn",)
GEMM_TARGETS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten._scaled_dot",
                "lens.linear_onednn")

SCALAR_REDUCTIONS = {"max": "NaN propagation", "min": "NaN propagation", "argmax": "first index of the maximum",
                     "argmin": "first index of the minimum"}
# reason code -> message template (`{...}` from the record's details): one place says each decision in words
MESSAGES = {
    "max_fusion_size": "did not join `{kernel_node}`'s kernel: together they would be {size} nodes, over "
                       "compiler.config.max_fusion_size = {limit}",
    "loop_shape": "did not join `{kernel_node}`'s kernel: its loops ({shape}) share no outer loop with the "
                  "kernel's ({outer})",
    "other_iteration": "did not join `{kernel_node}`'s kernel: it reads `{producer}` at another iteration of the "
                       "kernel's outer loop",
    "alone": "did not join `{kernel_node}`'s kernel: one of them is computed alone, where it is made, to free the "
             "large buffers it reads (lowering/graph.py's HELD_BYTES_BOUND)",
    "no_simd_reduction": "the {reduction} loop runs scalar: OpenMP's `simd reduction` has no operator that keeps "
                         "eager's {keeps} ({dtype})",
    "gemm": "runs as an ATen call ({target}): matrix products always call ATen's GEMM{detail}",
    "no_lowering": "runs as an ATen call ({target}): the compiler has no lowering for this op",
    "convolution": "runs as a oneDNN convolution ({target}) over a weight packed once{detail}",
    "dtype": "runs as an ATen call ({target}): {detail}",
    "dynamic_size": "runs as an ATen call ({target}): {detail}",
    "lowering_failed": "runs as an ATen call ({target}): {detail}",
    "duplicate": "computes what `{kept}` computes (the same op on the same arguments): it is `{kept}`'s value, with no "
                 "code of its own",
    "eager_dynamic_shapes": "runs eagerly (no generated code): {detail}",
    "eager_data_dependent": "runs eagerly (no generated code): {detail}",
    "eager_other": "runs eagerly (no generated code): {detail}",
}


@dataclass
class WhyRecord:
    kind: str  # aten_call | not_fused | not_vectorized | eager_graph
    nodes: list[str]  # the FX nodes the decision is about (first: the one whose line shows it)
    reason: str  # a key of MESSAGES
    message: str
    fix: dict | None = None  # {"title", "setting", "value"}: a config change that undoes the decision
    related: list[str] = field(default_factory=list)  # other nodes it names (the kernel it did not join)
    kernel: str | None = None  # filled when written: the kernel holding `nodes[0]`

    def to_format(self) -> why_format.WhyRecord:
        """The record as why.json holds it (lens_format owns the file's fields)."""
        return why_format.WhyRecord(self.kind, tuple(self.nodes), self.reason, self.message, self.kernel,
                                    why_format.WhyFix.from_json(self.fix), tuple(self.related))


_records: ContextVar[list[WhyRecord] | None] = ContextVar("lens_why_records", default=None)


def begin() -> None:
    """Start collecting one graph's decisions (the frontend, before lowering)."""
    _records.set([])


def finish(graph_id: str, ir_nodes: Iterable, kernels: Iterable[MappedKernel]) -> dict:
    """why.json's document: the lowered graph's extern calls (`ir_nodes` with a `reason`), then the decisions
    stages reported; `kernels`, kernel_map.json's (lens_format MappedKernel), name the kernel holding each
    record's node."""
    aten_calls(n for n in ir_nodes if getattr(n, "reason", None) is not None)
    records = _records.get() or []
    _records.set(None)
    kernels = list(kernels)
    extern = {n: k.name for k in kernels if k.kind == "extern" for n in k.nodes}
    generated = {n: k.name for k in kernels if k.kind != "extern" for n in k.nodes}
    records.sort(key=lambda r: r.kind != "aten_call")
    for r in records:  # a buffer realized for an ATen call's argument names that call among its nodes: last
        if r.kind != "aten_call":
            r.nodes.sort(key=lambda n: n in extern)
        kernel_of = extern if r.kind == "aten_call" else generated
        r.kernel = next((kernel_of[n] for n in r.nodes if n in kernel_of), None)
    return why_format.WhyFile(graph_id, [r.to_format() for r in records], config_snapshot()).to_json()


def record(kind: str, nodes: Iterable[str], reason: str, fix: dict | None = None,
           related: Iterable[str] = (), **details) -> None:
    found = _records.get()
    if found is None:  # not compiling under the frontend (tests calling a stage alone)
        return
    words = {k: _words(v) for k, v in details.items()}
    r = WhyRecord(kind, list(nodes), reason, MESSAGES[reason].format(**words), fix, list(related))
    if r not in found:
        found.append(r)


def _words(value) -> str:
    """A detail as the message says it: loop sizes `8192×1024`, dtypes without `torch.`."""
    if isinstance(value, tuple):
        return "×".join(str(v) for v in value) or "none"
    return str(value).replace("torch.", "")


def fusion_refused(kernel, node, reason: str, **details) -> None:
    """The scheduler kept buffer `node` out of the FusedKernel `kernel`; returns None (what `_can_join` returns)."""
    limit, size = config.max_fusion_size, len(set(kernel.origins) | set(node.origins))
    value = max(limit * 2, size)
    fix = ({"title": f"Set compiler.config.max_fusion_size = {value}", "setting": "max_fusion_size",
            "value": value} if reason == "max_fusion_size" else None)
    nodes = [node.origin] + [o for o in node.origins if o != node.origin]
    record("not_fused", nodes, reason, fix, kernel.origins, kernel_node=kernel.nodes[-1].origin, size=size,
           limit=limit, **details)
    return None


def not_vectorized(nodes: list[str], reason: str, **details) -> None:
    if reason == "no_simd_reduction":
        details["keeps"] = f"{details['reduction']} semantics: " + SCALAR_REDUCTIONS.get(details["reduction"], "")
    record("not_vectorized", nodes, reason, **details)


def aten_reason(target: str, reason: str) -> str:
    """A reason code for an extern call from the lowering's words."""
    if target.startswith(CONVOLUTION_TARGETS):
        return "convolution"
    if target.startswith(GEMM_TARGETS) or "addmm" in reason:
        return "gemm"
    if reason.startswith("no lowering"):
        return "no_lowering"
    if re.search(r"dtype", reason):
        return "dtype"
    if re.search(r"symbolic|SymbolicSize|dynamic|data-dependent", reason):  # (an `.item()`/nonzero size too)
        return "dynamic_size"
    return "lowering_failed"


def aten_calls(externs: Iterable) -> None:
    """Each ExternCall of the lowered graph (its `origin`, `target`, `reason`)."""
    for e in externs:
        code = aten_reason(e.target, e.reason)
        detail = f" ({e.reason})" if code == "gemm" and not e.reason.startswith("no lowering") else \
            "" if code == "gemm" else _convolution_detail(e) if code == "convolution" else e.reason
        record("aten_call", [e.origin], code, target=e.target, detail=detail)


WINOGRAD = ("; computed by Winograd's F(4x4, 3x3) (compiler/machine/winograd.py): 4x fewer multiplications than the "
            "direct convolution, rounded differently from eager's (about 1e-6 relative); LENS_WINOGRAD=0 computes it "
            "directly")


def _convolution_detail(e) -> str:
    """What a frozen convolution's call computes it by: Winograd's transforms where machine/winograd.py takes its
    sizes (known at compile time; with symbolic sizes each call's decide), else oneDNN's direct convolution."""
    from compiler.machine import winograd
    add = e.target.startswith("lens.conv2d_onednn_add")
    if len(e.args) < (8 if add else 7):
        return ""
    x, weight = e.args[0], e.args[2 if add else 1]
    stride, dilation, groups = (e.args[i].value for i in ((5, 6, 7) if add else (4, 5, 6)))
    sizes = [x.view[0] if x.view else None, weight.view[0] if weight.view else None,
             e.outputs[0][2].size if e.outputs and e.outputs[0] else None]
    if not config.cpp.winograd or any(s is None for s in sizes):
        return ""
    try:
        x_size, w_size, out_size = ([int(d) for d in s] for s in sizes)
    except TypeError:  # (a symbolic size)
        return "; Winograd's F(4x4, 3x3) where a call's sizes are worth it (compiler/machine/winograd.py)"
    return WINOGRAD if winograd.takes_sizes(e.outputs[0][1], x_size, w_size, stride, dilation, groups, out_size) \
        else ""


def eager_graph(graph_id: str, why: str, nodes: Iterable[str] = ()) -> dict:
    """why.json of a graph that runs eagerly: its one record."""
    code = ("eager_data_dependent" if "data-dependent" in why else
            "eager_dynamic_shapes" if re.search(r"symbolic|dynamic", why) else "eager_other")
    r = WhyRecord("eager_graph", list(nodes), code, MESSAGES[code].format(detail=why))
    _records.set(None)
    return why_format.WhyFile(graph_id, [r.to_format()], config_snapshot()).to_json()


# settings about the debug output itself (on whenever a why.json is written) and its checks
NOT_SNAPSHOT = frozenset({"debug", "debug_dir_root", "verify_plan"})
SETTING_TYPES = (bool, int, float, str, tuple, list, dict, type(None))


def config_snapshot() -> dict[str, object]:
    """The `compiler.config` settings (`cpp.` ones by their dotted name) whose value differs from its default: what
    config.py computes with no environment variable set, so a LENS_* variable counts as a change too."""
    current, defaults = _settings(vars(config)), _defaults()
    return {name: list(value) if isinstance(value, tuple) else value for name, value in current.items()
            if name in defaults and defaults[name] != value}


def _settings(namespace: dict) -> dict[str, object]:
    found = {}
    for prefix, values in (("", namespace), ("cpp.", vars(namespace["cpp"]) if "cpp" in namespace else {})):
        for name, value in values.items():
            if not name.startswith("_") and name not in NOT_SNAPSHOT and isinstance(value, SETTING_TYPES):
                found[prefix + name] = value
    return found


@functools.cache
def _defaults() -> dict[str, object]:
    """config.py run again in a namespace of its own whose `os.environ` is empty."""
    class NoEnvironment:
        environ: dict[str, str] = {}
        path = os.path

    def importer(name, *args, **kwargs):
        return NoEnvironment if name == "os" else builtins.__import__(name, *args, **kwargs)

    with open(config.__file__, encoding="utf-8") as source:
        code = compile(source.read(), config.__file__, "exec")
    namespace = {"__name__": "compiler.config_defaults", "__builtins__": {**vars(builtins), "__import__": importer}}
    exec(code, namespace)
    return _settings(namespace)
