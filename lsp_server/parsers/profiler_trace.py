"""Parses a plain torch.profiler Chrome trace of the user's own loop (`*.pt.trace.json`, as
tensorboard_trace_handler writes it): device kernels with the CPU op that launched each (its `External id`),
the compiled graphs' calls (`## Call CompiledFxGraph <key> ##` ranges) and the profiler steps.
Pure JSON -> dataclasses; malformed events are skipped, nothing here raises on content."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

TRACE_SUFFIX = ".pt.trace.json"
GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class CpuOp:
    name: str
    ts: float  # µs
    dur: float
    tid: int | None
    external_id: int | None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class DeviceKernel:
    name: str
    category: str  # kernel | gpu_memcpy | gpu_memset
    ts: float
    dur: float
    external_id: int | None
    launcher: str | None  # the CPU op that launched it: the Triton kernel's own record function, `aten::mm`, ...
    launcher_ts: float | None
    registers: int | None = None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None


@dataclass
class GraphCall:
    """One call of a compiled graph on the CPU side and the device kernels its ops launched."""
    label: str
    ts: float
    end: float
    tid: int | None
    kernels: list[DeviceKernel] = field(default_factory=list)

    @property
    def device_end(self) -> float:
        return max([self.end, *(k.ts + k.dur for k in self.kernels)])

    def triton_names(self) -> set[str]:
        return {k.name for k in self.kernels if k.launcher == k.name}


@dataclass
class ProfilerTrace:
    path: Path | None = None
    kernels: list[DeviceKernel] = field(default_factory=list)
    calls: list[GraphCall] = field(default_factory=list)
    steps: list[CpuOp] = field(default_factory=list)
    device_name: str | None = None
    problem: str | None = None

    def busy_percent(self) -> float | None:
        """Share of the profiled steps' wall time some kernel ran (union of kernel intervals)."""
        if not self.steps:
            return None
        busy = sum(_covered(self.kernels, step.ts, step.end) for step in self.steps)
        wall = sum(step.dur for step in self.steps)
        return 100.0 * busy / wall if wall else None


def _covered(kernels: list[DeviceKernel], start: float, end: float) -> float:
    spans = sorted((max(k.ts, start), min(k.ts + k.dur, end)) for k in kernels if k.ts < end and k.ts + k.dur > start)
    total, reach = 0.0, start
    for lo, hi in spans:
        lo = max(lo, reach)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dims(value: object) -> tuple[int, ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(v, int) for v in value) else None


def _complete(event: object) -> tuple[dict, dict] | None:
    if not isinstance(event, dict) or event.get("ph") != "X" or not isinstance(event.get("name"), str):
        return None
    if _number(event.get("ts")) is None or _number(event.get("dur")) is None:
        return None
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    return event, args


def parse_profiler_trace(text: str, path: Path | None = None) -> ProfilerTrace:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        return ProfilerTrace(path, problem=f"not JSON: {error}")
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return ProfilerTrace(path, problem="no traceEvents list")
    ops: list[CpuOp] = []
    device: list[tuple[dict, dict]] = []
    steps: list[CpuOp] = []
    for event in data["traceEvents"]:
        found = _complete(event)
        if found is None:
            continue
        event, args = found
        category = event.get("cat")
        op = CpuOp(event["name"], float(event["ts"]), float(event["dur"]), _int(event.get("tid")),
                   _int(args.get("External id")))
        if category == "cpu_op":
            ops.append(op)
        elif category in DEVICE_CATEGORIES:
            device.append((event, args))
        elif category == "user_annotation" and op.name.startswith(STEP_PREFIX):
            steps.append(op)
    launcher = {op.external_id: op for op in ops if op.external_id is not None}
    kernels = []
    for event, args in device:
        op = launcher.get(_int(args.get("External id")))
        kernels.append(DeviceKernel(event["name"], event["cat"], float(event["ts"]), float(event["dur"]),
                                    _int(args.get("External id")), op.name if op else None, op.ts if op else None,
                                    _int(args.get("registers per thread")), _dims(args.get("grid")),
                                    _dims(args.get("block"))))
    kernels.sort(key=lambda k: k.ts)
    calls = [GraphCall(op.name, op.ts, op.end, op.tid) for op in sorted(ops, key=lambda o: o.ts)
             if op.name.startswith(GRAPH_CALL_PREFIX)]
    for kernel in kernels:
        if kernel.launcher_ts is None:
            continue
        call = next((c for c in calls if c.ts <= kernel.launcher_ts <= c.end), None)
        if call is not None:
            call.kernels.append(kernel)
    props = data.get("deviceProperties")
    name = props[0].get("name") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    return ProfilerTrace(path, kernels, calls, sorted(steps, key=lambda s: s.ts),
                         name if isinstance(name, str) else None)


def read_profiler_trace(path: Path) -> ProfilerTrace:
    try:
        return parse_profiler_trace(path.read_text(encoding="utf-8", errors="replace"), path)
    except OSError as error:
        return ProfilerTrace(path, problem=str(error))
