"""Typed server settings, validated from `initializationOptions` (invalid values fall back to defaults)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

SEVERITIES = ("error", "warning", "information", "hint")


@dataclass
class Settings:
    debug_roots: list[str] = field(default_factory=list)  # extra roots beside each workspace folder
    trace_dirs: list[str] = field(default_factory=list)  # TORCH_TRACE folders (read by the trace parser)
    profiler_traces: list[str] = field(default_factory=list)  # *.pt.trace.json files or folders holding them
    diagnostic_severity: str = "error"  # compile errors and accuracy mismatches
    graph_break_severity: str = "warning"  # structured-trace findings, by kind
    recompile_severity: str = "information"
    compile_failure_severity: str = "error"
    rank_divergence_severity: str = "warning"
    note_severity: str = "information"  # notes.txt: nodes run as ATen calls, graphs that run eagerly
    debounce_ms: int = 50
    watch: bool = True
    inlay_hints: bool = True
    code_lens: bool = True

    def trace_severity(self, kind: str) -> str:
        """The configured severity of a structured-trace finding kind (graph_break, recompile, ...)."""
        return getattr(self, f"{kind}_severity", "warning")


# Client key (camelCase, as VS Code settings `kernelLens.*` send them) → field name and checker.
SETTING_KEYS: dict[str, tuple[str, Any]] = {
    "debugRoots": ("debug_roots", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "traceDirs": ("trace_dirs", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "profilerTraces": ("profiler_traces", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "diagnosticSeverity": ("diagnostic_severity", lambda v: v in SEVERITIES),
    "graphBreakSeverity": ("graph_break_severity", lambda v: v in SEVERITIES),
    "recompileSeverity": ("recompile_severity", lambda v: v in SEVERITIES),
    "compileFailureSeverity": ("compile_failure_severity", lambda v: v in SEVERITIES),
    "rankDivergenceSeverity": ("rank_divergence_severity", lambda v: v in SEVERITIES),
    "noteSeverity": ("note_severity", lambda v: v in SEVERITIES),
    "debounceMs": ("debounce_ms", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000),
    "watch": ("watch", lambda v: isinstance(v, bool)),
    "inlayHints": ("inlay_hints", lambda v: isinstance(v, bool)),
    "codeLens": ("code_lens", lambda v: isinstance(v, bool)),
}


def parse_settings(options: Any) -> tuple[Settings, list[str]]:
    """Settings from `{"kernelLens": {...}}` or a flat dict; returns the problems found (one per key)."""
    settings, problems = Settings(), []
    if options is None:
        return settings, problems
    if not isinstance(options, dict):
        return settings, [f"initializationOptions must be an object, got {type(options).__name__}"]
    section = options.get("kernelLens", options)
    if not isinstance(section, dict):
        return settings, ["kernelLens settings must be an object"]
    for key, value in section.items():
        known = SETTING_KEYS.get(key)
        if known is None:
            continue  # unknown keys are ignored (newer extension, older server)
        name, valid = known
        if valid(value):
            setattr(settings, name, value)
        else:
            default = next(f for f in fields(Settings) if f.name == name)
            problems.append(f"kernelLens.{key}: invalid value {value!r}; using the default "
                            f"{getattr(Settings(), default.name)!r}")
    return settings, problems
