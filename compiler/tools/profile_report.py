"""Prints profile.json files as tables (rich) for `kernel-lens profile`, and says which graph folders have no
profile (or accuracy report) and why."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from lens_format import files
from lens_format.errors import ParseError
from lens_format.kernel_map import read_kernel_map
from lens_format.notes import read_notes
from lens_format.profile import read_profile


WIDTH_WITHOUT_TERMINAL = 1000  # a pipe or file gets each table at its natural width: no name cut, no path split


def report_console() -> Console:
    """A terminal's width when there is one; without one (rich's default is 80 columns), as wide as the table."""
    console = Console()
    return console if console.is_terminal else Console(width=WIDTH_WITHOUT_TERMINAL)


def graph_kind(folder: Path) -> str:
    """forward | backward | inference, from a lens graph folder's kernel_map.json ("" when it has none)."""
    try:
        return read_kernel_map(folder / files.KERNEL_MAP).graph_kind
    except (ParseError, OSError):
        return ""


def print_profiles(paths: list[str], console: Console | None = None) -> None:
    console = console or report_console()
    if not paths:
        console.print("no profile was written (did the script call a function compiled with backend='lens'?)")
        return
    for path in paths:
        try:
            p = read_profile(Path(path))
        except ParseError as e:  # cut short while written, another version: said, never a traceback
            console.print(f"[red]unreadable profile {path}: {e.message}[/red]")
            continue
        speedup = p.ratio()
        speed = f"{speedup:.2f}x" if speedup else "n/a"
        eager = f"{p.eager_ms:.4f}" if p.eager_ms is not None else "n/a"
        compiled = f"{p.compiled_ms:.4f}" if p.compiled_ms is not None else "n/a"
        kind = graph_kind(Path(path).parent)
        label = f"{p.graph_id} ({kind})" if kind else p.graph_id
        table = Table(title=f"{label}: eager {eager} ms · compiled {compiled} ms · speedup {speed}",
                      title_justify="left")
        for col in ("kernel", "kind", "calls", "ms/iter", "% of compiled"):
            table.add_column(col, justify="left" if col in ("kernel", "kind") else "right")
        for k in p.kernels:
            table.add_row(k.name, k.kind, str(k.calls), f"{k.total_ms:.4f}", f"{k.percent:.1f}%")
        for c in p.categories:
            table.add_row(f"[bold]{c.kind} (all)[/bold]", c.kind, "", f"{c.total_ms:.4f}", f"{c.percent:.1f}%")
        table.columns[0].no_wrap = True  # a kernel's name whole, never folded into look-alike rows
        console.print(table)
        console.print(f"  {path}", soft_wrap=True, highlight=False)


def why_no_file(folder: Path) -> str:
    """Why a lens graph folder has no profile.json / accuracy.json: the graph runs eagerly (notes.txt), else it
    was never called the way the mode needs (the child's own lines say more)."""
    try:
        eager = read_notes(folder / files.NOTES).eager
    except (ParseError, OSError):
        eager = None
    if eager is not None:
        return f"it runs eagerly (no generated code): {eager.reason}"
    return "no call of it was checked (see the lines above)"


def report_missing(runs: list[str], file_name: str, verb: str) -> list[str]:
    """One line per lens graph folder of `runs` without `file_name`: which graph, forward or backward, and why."""
    lines = []
    for run in runs:
        for folder in sorted(Path(run, files.LENS_FOLDER).glob("graph_*"), key=lambda f: _number(f.name)):
            if not (folder / file_name).exists():
                kind = graph_kind(folder)
                label = f"{folder.name} ({kind})" if kind else folder.name
                lines.append(f"{label}: not {verb}: {why_no_file(folder)}")
    return lines


def _number(name: str) -> int:
    digits = name.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else -1
