"""Builds C++ source into a shared library with g++, cached on disk by source + flags + compiler version.

Safe for several processes at once: each build happens in a private temp dir, then is renamed into place.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from compiler import config


@dataclass
class CppDiagnostic:
    file: str
    line: int
    column: int
    severity: str  # error | warning | note
    message: str


class CppCompileError(Exception):
    """g++ rejected the generated source; `diagnostics` holds its parsed messages."""

    def __init__(self, command: list[str], stderr: str, source_path: str, diagnostics: list[CppDiagnostic]):
        self.command, self.stderr, self.source_path, self.diagnostics = command, stderr, source_path, diagnostics
        first = next((d for d in diagnostics if d.severity == "error"), None)
        where = f"{first.file}:{first.line}:{first.column}: {first.message}" if first else stderr.strip()[:500]
        super().__init__(f"C++ compile error: {where}")


class CompilerNotFoundError(Exception):
    """No usable C++ compiler (g++) on this machine."""


_DIAG = re.compile(r"^(?P<file>[^:\n]+\.(?:cpp|cc|h|hpp)):(?P<line>\d+):(?P<col>\d+): "
                   r"(?P<sev>error|warning|note|fatal error): (?P<msg>.*)$")


def parse_diagnostics(stderr: str) -> list[CppDiagnostic]:
    """g++'s `file:line:col: severity: message` lines."""
    out = []
    for line in stderr.splitlines():
        m = _DIAG.match(line.strip())
        if m:
            sev = "error" if m["sev"] == "fatal error" else m["sev"]
            out.append(CppDiagnostic(m["file"], int(m["line"]), int(m["col"]), sev, m["msg"]))
    return out


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    if shutil.which(cxx) is None:
        raise CompilerNotFoundError(f"C++ compiler {cxx!r} not found on PATH: install g++ (apt-get install g++) "
                                    f"or set CXX to a working compiler")
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        raise CompilerNotFoundError(f"C++ compiler {cxx!r} does not run: {e}") from e


# Added to config.cpp.flags: skip libstdc++'s C++17 special math functions (std::beta, std::riemann_zeta...),
# which <cmath> parses on every build (~60 ms) and no kernel calls.
EXTRA_FLAGS: tuple[str, ...] = ("-D_GLIBCXX_BITS_SPECFUN_H",)


def build_flags() -> list[str]:
    return [*config.cpp.flags, *EXTRA_FLAGS]


def link_flags() -> list[str]:
    """Libraries, after the source on the command line (--as-needed drops those before it)."""
    from compiler.codegen.vector_math import link_flags as vector_math_link_flags
    return vector_math_link_flags()


def cache_key(source: str) -> str:
    cxx = config.cpp.cxx
    h = hashlib.sha256()
    for part in (source, cxx, " ".join(build_flags() + link_flags()), compiler_version(cxx)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def build_shared_library(source: str, name: str = "kernels") -> str:
    """The path of a .so built from `source` (from the cache when it was built before). The cached files
    are named after the key, not `name`, so the same source compiled under another graph id hits."""
    key = cache_key(source)
    folder = os.path.join(config.cache_dir(), key[:2], key)
    so_path = os.path.join(folder, "kernels.so")
    if os.path.exists(so_path):
        return so_path
    os.makedirs(folder, exist_ok=True)
    src_path = os.path.join(folder, "kernels.cpp")
    _write_atomic(src_path, source)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp_so = os.path.join(tmp, "kernels.so")
        cmd = [config.cpp.cxx, *build_flags(), "-o", tmp_so, src_path, *link_flags()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise CompilerNotFoundError(f"could not run {config.cpp.cxx!r}: {e}") from e
        if proc.returncode != 0:
            raise CppCompileError(cmd, proc.stderr, src_path, parse_diagnostics(proc.stderr))
        os.replace(tmp_so, so_path)
    return so_path


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
