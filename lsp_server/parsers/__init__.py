"""One parser per debug-directory file format; each returns plain dataclasses and never imports the file.

`PARSERS` is the table file name → parser that the run loader (and the fuzz test) use; the files our compiler
writes are read by `lens_format`'s own readers, which own their fields.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from lens_format.accuracy import read_accuracy
from lens_format.compile_error import read_compile_error
from lens_format.errors import ParseError, UnsupportedVersionError
from lens_format.kernel_map import read_kernel_map
from lens_format.kernel_plans import read_kernel_plans
from lens_format.notes import read_notes
from lens_format.profile import read_profile
from lens_format.symbols import read_symbols
from lens_format.why import read_why
from lsp_server.parsers.fx_graph_readable import parse_fx_graph_readable
from lsp_server.parsers.inductor_benchmark import (
                                                   BENCHMARK_OUTPUT_FILE,
                                                   BENCHMARK_TRACE_FILE,
                                                   read_benchmark_output,
                                                   read_chrome_trace,
)
from lsp_server.parsers.ir_post_fusion import parse_ir_post_fusion
from lsp_server.parsers.output_code import parse_output_code
from lsp_server.parsers.provenance import KERNEL_STACKS_FILE, parse_kernel_stacks, parse_provenance
from lsp_server.parsers.vectorization import parse_vectorization

PARSERS: dict[str, Callable[[Path], Any]] = {
    "fx_graph_readable.py": parse_fx_graph_readable,
    "output_code.py": parse_output_code,
    "kernel_map.json": read_kernel_map,
    "inductor_provenance_tracking_node_mappings.json": parse_provenance,
    KERNEL_STACKS_FILE: parse_kernel_stacks,  # each kernel's full user stacks (a trace run's, from its log)
    "fx_graph_transformed.py": parse_fx_graph_readable,  # the post-grad graph (its nodes no other file has)
    "ir_post_fusion.txt": parse_ir_post_fusion,
    "compile_error.json": read_compile_error,
    "accuracy.json": read_accuracy,
    "profile.json": read_profile,
    "vectorization.txt": parse_vectorization,  # loops g++ left scalar (ours)
    "notes.txt": read_notes,  # ATen fallbacks and eager graphs, and why (ours)
    "why.json": read_why,  # every decision worth a "why", machine-readable (ours)
    "symbols.json": read_symbols,  # Dynamo's size symbols of a dynamic-shape graph (ours)
    "kernel_plans.json": read_kernel_plans,  # each kernel's plan and its decisions with reasons (ours)
    BENCHMARK_OUTPUT_FILE: read_benchmark_output,  # `python output_code.py -p` stdout (real Inductor)
    BENCHMARK_TRACE_FILE: read_chrome_trace,  # the Chrome trace it writes
}

__all__ = ["PARSERS", "ParseError", "UnsupportedVersionError"]
