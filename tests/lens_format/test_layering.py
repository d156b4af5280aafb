"""The format package's place in the import graph: it imports nothing of ours, and `compiler` and `lsp_server`
import only it from each other (ARCHITECTURE.md)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("compiler", "lens_format", "lsp_server")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Each module file of `package` -> the top-level packages it imports (at any depth in the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_the_format_package_imports_nothing_of_ours_nor_torch():
    offending = {f: sorted(n & {"compiler", "lsp_server", "torch"}) for f, n in imported_packages("lens_format").items()
                 if n & {"compiler", "lsp_server", "torch"}}
    assert offending == {}


def test_compiler_and_server_share_only_the_format_package():
    compiler_to_server = {f for f, n in imported_packages("compiler").items() if "lsp_server" in n}
    server_to_compiler = {f for f, n in imported_packages("lsp_server").items() if "compiler" in n}
    assert compiler_to_server == set() and server_to_compiler == set()
    # and both do read and write through it (the check above would hold for two packages sharing nothing)
    assert any("lens_format" in n for n in imported_packages("compiler").values())
    assert any("lens_format" in n for n in imported_packages("lsp_server").values())
