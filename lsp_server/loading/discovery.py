"""Finds `torch_compile_debug/` and `torch_trace/` folders at any depth below a workspace folder (a script run
from a sub-folder writes them into its own working directory), skipping trees that never hold a user's runs.

One breadth-first walk of directory entries (no stat per file), bounded by `MAX_DIRS` folders per root.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

DEBUG_DIR_NAME = "torch_compile_debug"
TRACE_DIR_NAME = "torch_trace"  # `TORCH_TRACE=./torch_trace`
# Folders never walked into: dependency trees and caches; hidden folders (`.git`, `.venv`, `.tox`) and
# Python environments (a folder holding `pyvenv.cfg` or `conda-meta`) are skipped too.
SKIPPED_NAMES = frozenset({"node_modules", "__pycache__", "site-packages", "dist-packages"})
ENV_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})  # a virtualenv's / conda environment's own entry
MAX_DIRS = 20_000  # folders listed per root: a bound on the cost of a huge workspace (the nearest found first)


@dataclass
class Discovery:
    """What one walk found below a root; `truncated` when it stopped at `MAX_DIRS` folders."""

    root: Path
    debug_dirs: list[Path] = field(default_factory=list)
    trace_dirs: list[Path] = field(default_factory=list)
    listed: int = 0
    truncated: bool = False


def skipped_name(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_NAMES


def is_environment(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in ENV_MARKERS)


def discover(root: Path, max_dirs: int = MAX_DIRS) -> Discovery:
    """`torch_compile_debug` and `torch_trace` folders at any depth below `root` (root itself included when it is
    one); a found folder is not walked into, nor are symlinks (no cycles) or skipped trees."""
    found = Discovery(root)
    if root.name == DEBUG_DIR_NAME:
        found.debug_dirs.append(root)
        return found
    if root.name == TRACE_DIR_NAME:
        found.trace_dirs.append(root)
        return found
    queue: deque[str] = deque([str(root)])
    while queue:
        if found.listed >= max_dirs:
            found.truncated = True
            break
        folder = queue.popleft()
        found.listed += 1
        children: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if name in ENV_MARKERS:
                        children = []  # a Python environment: nothing of the user's below
                        break
                    try:
                        if not entry.is_dir(follow_symlinks=False):
                            continue
                    except OSError:
                        continue
                    if name == DEBUG_DIR_NAME:
                        found.debug_dirs.append(Path(entry.path))
                    elif name == TRACE_DIR_NAME:
                        found.trace_dirs.append(Path(entry.path))
                    elif not skipped_name(name):
                        children.append(entry.path)
        except OSError:
            continue
        queue.extend(sorted(children))
    found.debug_dirs.sort()
    found.trace_dirs.sort()
    return found


def enclosing_found_dir(path: Path, root: Path) -> tuple[str, Path] | None:
    """For a path that changed below `root`: the `torch_compile_debug` / `torch_trace` folder it is in or is,
    as (kind "debug" | "trace", folder), unless a skipped tree or a virtualenv lies on the way."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    folder = root
    for part in parts:
        if part in (DEBUG_DIR_NAME, TRACE_DIR_NAME):
            return ("debug" if part == DEBUG_DIR_NAME else "trace", folder / part)
        if skipped_name(part) or is_environment(folder):
            return None
        folder = folder / part
    return None
