"""Running the user's script for a `kernel-lens` command: in a child Python in its own folder, with our debug output
(and real Inductor's, and TORCH_TRACE) switched on, its output shown live, and the debug run folders it made."""
from __future__ import annotations

import contextlib
import glob
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass

STDERR_KEEP = 4 * 2**20


def debug_root(script_dir: str) -> str:
    return os.path.join(script_dir, "torch_compile_debug")


def runs_under(root: str) -> set[str]:
    return set(glob.glob(os.path.join(root, "run_*")))


def script_env(script: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running a user script with our debug output (and real Inductor's) switched on."""
    folder = os.path.dirname(os.path.abspath(script))
    env = dict(os.environ)
    env.update({
        "LENS_DEBUG": "1",
        "TORCH_COMPILE_DEBUG": "1",
        "TORCH_COMPILE_DEBUG_DIR": folder,
        "TORCH_TRACE": env.get("TORCH_TRACE") or os.path.join(folder, "torch_trace"),
    })
    env.update(extra or {})
    return env


@dataclass
class ScriptRun:
    exit_code: int
    runs: list[str]  # debug run folders this run created
    stderr: str  # the tail of what the script printed to stderr (it is also shown live)


def run_script(script: str, script_args: list[str], extra_env: dict[str, str] | None = None,
               launcher: tuple[str, ...] = (), progress: bool = False) -> ScriptRun:
    """Run the user's script in a child Python (its own cwd = its folder), showing its output live;
    `launcher` runs it through a module first (e.g. ("-m", "compiler.tools.narrow_child")); `progress` prints a
    line per graph as its debug folder lands (compile_progress.py), before any line the script printed after."""
    from compiler.tools.compile_progress import CompileProgress
    script = os.path.abspath(script)
    folder = os.path.dirname(script)
    before = runs_under(debug_root(folder))
    watcher = CompileProgress(debug_root(folder), before) if progress else None
    env = script_env(script, extra_env)
    if watcher is not None:
        env["PYTHONUNBUFFERED"] = "1"  # its stdout is relayed too: line by line, as on a terminal
    tail: list[str] = []
    with watcher or contextlib.nullcontext():
        proc = subprocess.Popen([sys.executable, *launcher, script, *script_args], cwd=folder, env=env,
                                stdout=subprocess.PIPE if watcher is not None else None,
                                stderr=subprocess.PIPE, text=True, errors="replace")
        size = 0
        for stream, line in _relayed_lines(proc, watcher):
            if stream is sys.stderr:
                tail.append(line)
                size += len(line)
                while size > STDERR_KEEP and len(tail) > 1:
                    size -= len(tail.pop(0))
        code = proc.wait()
    return ScriptRun(code, sorted(runs_under(debug_root(folder)) - before), "".join(tail))


def _relayed_lines(proc: subprocess.Popen, watcher=None):
    """Each line the child writes, written to our own stream and yielded as (stream, line). Lines are read by a
    thread per pipe; before a batch of them is written, `watcher` polls once, so a graph whose files landed before
    the script printed a line is reported before that line (the files are written before the call returns)."""
    lines: queue.Queue = queue.Queue()
    pipes = [(p, ours) for p, ours in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)) if p is not None]

    def read(pipe, ours) -> None:
        for line in pipe:
            lines.put((ours, line))
        lines.put((ours, None))

    for pipe, ours in pipes:
        threading.Thread(target=read, args=(pipe, ours), daemon=True).start()
    open_pipes = len(pipes)
    while open_pipes:
        batch = [lines.get()]
        while not lines.empty():
            batch.append(lines.get())
        if watcher is not None:
            watcher.poll()
        for ours, line in batch:
            if line is None:
                open_pipes -= 1
                continue
            ours.write(line)
            ours.flush()  # whole lines, so the progress thread's lines never land inside one
            yield ours, line


def trace_logs(trace_dir: str) -> set[str]:
    return set(glob.glob(os.path.join(trace_dir, "**", "*.log"), recursive=True))
