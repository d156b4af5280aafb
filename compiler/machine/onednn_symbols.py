"""oneDNN's C API inside torch's own library, for helpers of ours that call it (compiler/machine/onednn_direct.py).

libtorch_cpu links oneDNN statically and exports none of its symbols, but keeps them in its symbol table: their
offsets (read once with `nm`, cached per library file and set of names) plus the address the library is loaded at in
this process (/proc/self/maps) are the functions' addresses. A helper is compiled against oneDNN's C header, found by
`include_dir` (`pip install --no-deps onednn-devel`: headers only; the Makefile installs it), and handed those
addresses as a table. None of this is there on a stripped library, a platform without /proc or without `nm`: the
functions below then say None and their callers keep to ATen's ops.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import sysconfig

from compiler import config

log = logging.getLogger(__name__)

_TORCH_LIBRARY = "libtorch_cpu.so"


def include_dir() -> str | None:
    """The folder holding oneapi/dnnl/dnnl.h: `LENS_ONEDNN_INCLUDE`, else the environment's include folder (where
    `pip install onednn-devel` puts it), else None."""
    candidates = [os.environ.get("LENS_ONEDNN_INCLUDE"), os.path.join(sysconfig.get_path("data"), "include"),
                  os.path.join(sys.prefix, "include")]
    for folder in candidates:
        if folder and os.path.exists(os.path.join(folder, "oneapi", "dnnl", "dnnl.h")):
            return folder
    return None


def _loaded_library() -> tuple[str, int] | None:
    """(path, load address) of torch's libtorch_cpu.so in this process."""
    try:
        with open("/proc/self/maps") as f:
            lines = [line.split() for line in f if line.rstrip().endswith(_TORCH_LIBRARY)]
    except OSError:
        return None
    starts = [int(p[0].split("-")[0], 16) for p in lines if len(p) >= 6 and int(p[2], 16) == 0]
    return (lines[0][5], min(starts)) if starts else None


def _symbol_offsets(path: str, names: tuple[str, ...]) -> dict[str, int] | None:
    """`names`' offsets in the library at `path` (its symbol table, read by `nm` once per file and set of names, and
    cached), None unless all are there."""
    st = os.stat(path)
    wanted = hashlib.sha256(" ".join(names).encode()).hexdigest()[:16]
    cache = os.path.join(config.cache_dir(), "onednn_symbols", f"{st.st_size}-{int(st.st_mtime)}-{wanted}.json")
    try:
        with open(cache) as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    try:
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        log.info("kernel-lens: cannot read %s's symbols (%s): convolutions run ATen's op", path, e)
        return None
    offsets = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in names and parts[1] in "tT":
            offsets[parts[2]] = int(parts[0], 16)
    if len(offsets) != len(names):
        log.info("kernel-lens: %s lacks oneDNN's symbols %s: convolutions run ATen's op", path,
                 sorted(set(names) - set(offsets)))
        return None
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(f"{cache}.{os.getpid()}.tmp", "w") as f:
        json.dump(offsets, f)
    os.replace(f"{cache}.{os.getpid()}.tmp", cache)
    return offsets


def torch_functions(names: tuple[str, ...]) -> list[int] | None:
    """The addresses of oneDNN's C functions `names` in torch's library as loaded in this process, in that order
    (None where any is not found)."""
    located = _loaded_library()
    offsets = _symbol_offsets(located[0], names) if located is not None else None
    return None if offsets is None else [located[1] + offsets[name] for name in names]
