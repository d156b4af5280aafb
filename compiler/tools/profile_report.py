"""Prints profile.json files as tables (rich) for `kernel-lens profile`."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from lens_format.errors import ParseError
from lens_format.profile import read_profile


def print_profiles(paths: list[str], console: Console | None = None) -> None:
    console = console or Console()
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
        table = Table(title=f"{p.graph_id}: eager {eager} ms · compiled {compiled} ms · speedup {speed}",
                      caption=path)
        for col in ("kernel", "kind", "calls", "ms/iter", "% of compiled"):
            table.add_column(col, justify="left" if col in ("kernel", "kind") else "right")
        for k in p.kernels:
            table.add_row(k.name, k.kind, str(k.calls), f"{k.total_ms:.4f}", f"{k.percent:.1f}%")
        for c in p.categories:
            table.add_row(f"[bold]{c.kind} (all)[/bold]", c.kind, "", f"{c.total_ms:.4f}", f"{c.percent:.1f}%")
        console.print(table)
