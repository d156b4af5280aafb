"""Runs `python -m compiler <kind> <path>` for the editor, streaming its output line by line."""
from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

JOB_KINDS = ("compile", "profile", "check-accuracy", "profile-inductor")
FOLDER_JOBS = ("profile-inductor",)  # take a folder (a run, a graph) as well as a file
TAIL_CHARS = 4000


class JobError(ValueError):
    """A job request the server cannot run (unknown kind, missing file)."""


@dataclass
class JobResult:
    exit_code: int
    output_tail: str


async def run_job(kind: str, file: Path, on_line: Callable[[str], None],
                  python: str = sys.executable) -> JobResult:
    """Run the compiler CLI in the file's folder; `on_line` gets each output line as it arrives."""
    if kind not in JOB_KINDS:
        raise JobError(f"unknown job kind {kind!r}; expected one of {', '.join(JOB_KINDS)}")
    folder = kind in FOLDER_JOBS and file.is_dir()
    if not file.is_file() and not folder:
        raise JobError(f"{file}: no such file")
    process = await asyncio.create_subprocess_exec(
        python, "-m", "compiler", kind, str(file), cwd=str(file if folder else file.parent),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    tail = ""
    assert process.stdout is not None
    while True:
        raw = await process.stdout.readline()
        if not raw:
            break
        line = raw.decode("utf-8", errors="replace")
        tail = (tail + line)[-TAIL_CHARS:]
        on_line(line.rstrip("\n"))
    return JobResult(await process.wait(), tail)

