"""One parser per debug-directory file format; each returns plain dataclasses and never imports the file.

`PARSERS` is the table file name → parser that the run loader (and the fuzz test) use.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .accuracy import parse_accuracy
from .compile_error import parse_compile_error
from lens_format.errors import ParseError, UnsupportedVersionError
from .fx_graph_readable import parse_fx_graph_readable
from .inductor_benchmark import BENCHMARK_OUTPUT_FILE, BENCHMARK_TRACE_FILE, read_benchmark_output, read_chrome_trace
from .ir_post_fusion import parse_ir_post_fusion
from .kernel_map import parse_kernel_map
from .kernel_plans import parse_kernel_plans
from .notes import parse_notes
from .output_code import parse_output_code
from .profile import parse_profile
from .provenance import parse_provenance
from .symbols import parse_symbols
from .vectorization import parse_vectorization
from .why import parse_why

PARSERS: dict[str, Callable[[Path], Any]] = {
    "fx_graph_readable.py": parse_fx_graph_readable,
    "output_code.py": parse_output_code,
    "kernel_map.json": parse_kernel_map,
    "inductor_provenance_tracking_node_mappings.json": parse_provenance,
    "ir_post_fusion.txt": parse_ir_post_fusion,
    "compile_error.json": parse_compile_error,
    "accuracy.json": parse_accuracy,
    "profile.json": parse_profile,
    "vectorization.txt": parse_vectorization,  # loops g++ left scalar (ours)
    "notes.txt": parse_notes,  # ATen fallbacks and eager graphs, and why (ours)
    "why.json": parse_why,  # every decision worth a "why", machine-readable (ours)
    "symbols.json": parse_symbols,  # Dynamo's size symbols of a dynamic-shape graph (ours)
    "kernel_plans.json": parse_kernel_plans,  # each kernel's plan and its decisions with reasons (ours)
    BENCHMARK_OUTPUT_FILE: read_benchmark_output,  # `python output_code.py -p` stdout (real Inductor)
    BENCHMARK_TRACE_FILE: read_chrome_trace,  # the Chrome trace it writes
}

__all__ = ["PARSERS", "ParseError", "UnsupportedVersionError"]
