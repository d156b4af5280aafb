"""Runs a user script with every `torch.compile` forced onto one backend (LENS_NARROW_BACKEND) and each
compiled graph's first call checked against eager, forward and backward (first_call.py); writes the outcome
to LENS_NARROW_REPORT. Used by `kernel-lens narrow` in a child process:
`python -m compiler.tools.narrow_child SCRIPT [ARGS]`."""
from __future__ import annotations

import atexit
import json
import os
import runpy
import sys

import torch

from compiler.tools.accuracy import DEFAULT_TOL
from compiler.tools.first_call import FirstCallCheck, checking_first_call, placeholder_names

_REPORT = {"backend": os.environ.get("LENS_NARROW_BACKEND", "lens"), "graphs": 0, "mismatches": [],
           "compile_errors": [], "gradients_checked": 0}


def _checked_backend(name: str):
    from torch._dynamo.backends.registry import lookup_backend
    inner = lookup_backend(name)

    def backend(gm: torch.fx.GraphModule, example_inputs):
        _REPORT["graphs"] += 1
        graph = _REPORT["graphs"]
        try:
            compiled = inner(gm, example_inputs)
        except Exception as e:
            _REPORT["compile_errors"].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            raise

        def record(check: FirstCallCheck) -> None:
            _REPORT["gradients_checked"] += check.gradients_compared
            first = check.first()
            if first is not None:
                what, d = first
                _REPORT["mismatches"].append({"graph": graph, "what": what, "max_abs_error": d.max_abs_error,
                                              "summary": check.describe(what, d)})

        return checking_first_call(gm.forward, compiled, DEFAULT_TOL, record, placeholder_names(gm.forward))

    return backend


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m compiler.tools.narrow_child SCRIPT [ARGS]", file=sys.stderr)
        sys.exit(2)
    backend = _checked_backend(_REPORT["backend"])
    original = torch.compile

    def forced_compile(model=None, **kwargs):
        kwargs["backend"] = backend
        return original(model, **kwargs) if model is not None else original(**kwargs)

    torch.compile = forced_compile
    report_path = os.environ.get("LENS_NARROW_REPORT")
    if report_path:
        atexit.register(lambda: json.dump(_REPORT, open(report_path, "w")))
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
