"""Parses `compile_error.json` (a C++ build failure mapped to kernel, nodes and source) through the format
package, which owns its fields."""
from __future__ import annotations

from lens_format.compile_error import CompileDiagnostic, CompileError, read_compile_error

parse_compile_error = read_compile_error
__all__ = ["CompileDiagnostic", "CompileError", "parse_compile_error"]
