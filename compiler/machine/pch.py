"""A precompiled header for the prelude every generated translation unit starts with (<omp.h>, the libm
declarations of cpp_text/math_prelude.py, our helper templates, libmvec declarations). Parsing it took about half of each g++ build of a small graph
(0.17 s -> 0.08 s with the header precompiled, measured on the softmax kernel).

The header is built once per (prelude text, compiler, flags) into `<cache>/pch/<key>/`, in a detached
background process after the first build that needed it, so no compile waits for it; until it is ready,
builds parse the prelude as before. A kernel file compiled against it starts with `#line N "kernels.cpp"`, so
g++'s diagnostics and vectorization report keep naming lines of the full source.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import time

from compiler import config
from compiler.cpp_text.math_prelude import PRELUDE_END

HEADER = "lens_prelude.h"
_PENDING: list = []  # subprocess.Popen, or anything else with wait()
STALE_LOCK_S = 120.0  # a lock older than this belongs to a build that died


def split(source: str) -> tuple[str, str, int] | None:
    """(prelude, rest, line number of the rest's first line in `source`); None without the end marker."""
    i = source.find(PRELUDE_END)
    if i < 0:
        return None
    j = source.find("\n", i)
    j = len(source) if j < 0 else j + 1
    return source[:j], source[j:], source[:j].count("\n") + 1


def folder_for(prelude: str, cxx: str, flags: list[str], version: str) -> str:
    return keyed_folder("pch", prelude, cxx, flags, version)


def keyed_folder(kind: str, text: str, cxx: str, flags: list[str], version: str) -> str:
    """`<cache>/<kind>/<key>`: the home of something built from `text` by this compiler with these flags."""
    h = hashlib.sha256()
    for part in (text, cxx, " ".join(flags), version):
        h.update(part.encode())
        h.update(b"\0")
    return os.path.join(config.cache_dir(), kind, h.hexdigest()[:24])


def ready_header(prelude: str, cxx: str, flags: list[str], version: str, start: bool = True) -> str | None:
    """The header to `-include` when its precompiled form is ready; else None (and, with `start`, a build is
    started: a caller about to run g++ itself passes False and starts it afterwards, so that the niced
    background build does not share the cores with the build someone waits for)."""
    folder = folder_for(prelude, cxx, flags, version)
    header = os.path.join(folder, HEADER)
    if os.path.exists(header + ".gch"):
        return header
    if start:
        build_in_background(folder, {HEADER: prelude}, [cxx, *flags, "-x", "c++-header", header], header + ".gch")
    return None


def build_in_background(folder: str, files: dict[str, str], command: list[str], output: str) -> None:
    """Writes `files` into `folder` and runs `command -o <output>` in a detached, niced process, once: a lock
    keeps other processes from building it at the same time, and a failure leaves `failed` (with
    `build.log`) so that nobody tries again. The output appears under its name only when complete."""
    lock = claim(folder, files)
    if lock is None:
        return
    tmp = f"{output}.{os.getpid()}.tmp-out"
    q = shlex.quote
    script = (f"if nice -n 10 {shlex.join([*command, '-o', tmp])} 2>{q(os.path.join(folder, 'build.log'))}; "
              f"then mv -f {q(tmp)} {q(output)}; else rm -f {q(tmp)}; touch {q(os.path.join(folder, 'failed'))}; fi; "
              f"rm -f {q(lock)}")
    try:
        _PENDING.append(subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True))
    except OSError:
        os.remove(lock)


def background_library(kind: str, source: str, cxx: str, flags: list[str], version: str) -> str:
    """The path of the shared library `<cache>/<kind>/<key>/<kind>.so` built from the C++ `source` by `cxx` with
    `flags` (which make a shared object), its build started in the background when it is not there (once: see
    build_in_background); the file appears when the build is complete, and `build_failed` says when it never will."""
    folder = keyed_folder(kind, source, cxx, flags, version)
    path = os.path.join(folder, f"{kind}.so")
    if not os.path.exists(path):
        build_in_background(folder, {f"{kind}.cpp": source}, [cxx, *flags, os.path.join(folder, f"{kind}.cpp")],
                            path)
    return path


def build_failed(output: str) -> bool:
    """Whether the background build of `output` failed (its folder's `failed` marker; `build.log` says why)."""
    return os.path.exists(os.path.join(os.path.dirname(output), "failed"))


def claim(folder: str, files: dict[str, str]) -> str | None:
    """Take the build of what `folder` holds for this process: its lock's path, with `files` written, or None
    when another process is building it or a build failed before. Whoever holds the lock removes it."""
    if os.path.exists(os.path.join(folder, "failed")):
        return None
    os.makedirs(folder, exist_ok=True)
    lock = os.path.join(folder, ".building")
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        try:
            if time.time() - os.path.getmtime(lock) < STALE_LOCK_S:
                return None  # another process is building it
            os.utime(lock)
        except OSError:
            return None
    for name, text in files.items():
        path = os.path.join(folder, name)
        with open(f"{path}.{os.getpid()}.tmp", "w") as f:
            f.write(text)
        os.replace(f"{path}.{os.getpid()}.tmp", path)
    return lock


def add_pending(build) -> None:
    """Another background build (anything with `wait()`) for wait_for_builds to wait for."""
    _PENDING.append(build)


def wait_for_builds() -> None:
    """Wait for the background builds this process started (headers, compiler/machine/prebuilt.py's objects,
    size variants: compiler/machine/runtime.py), so that benchmarks and tests time no background g++."""
    while _PENDING:
        _PENDING.pop().wait()


def enabled() -> bool:
    return config.cpp.precompiled_header
