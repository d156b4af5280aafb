"""`kernel-lens profile-view DIR` and `kernel-lens kernel-view DIR` (also `python -m lsp_server ...`): VS Code's
*Show Profile* and *Open Kernel View* for any editor or a terminal. `--json` prints the server's own answers
(`kernelLens.getProfile` per run, `kernelLens.linkedLines` per source file); the text is read from them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lsp_server.features.commands import profile_json
from lsp_server.features.linked_lines import linked_lines_json
from lsp_server.features.lookup import path_of, uri_of
from lsp_server.index import Index
from lsp_server.reports.index_report import build_index


def profile_views(index: Index) -> list[dict[str, Any]]:
    """Each profiled run's `kernelLens.getProfile` answer, newest run first."""
    answers = (profile_json(index, run.id) for run in index.runs_newest_first())
    return [answer for answer in answers if answer is not None]


def kernel_views(index: Index) -> list[dict[str, Any]]:
    """`kernelLens.linkedLines` for each source file the runs compiled (the run answering for it), by path."""
    answers = (linked_lines_json(index, uri_of(file)) for file in sorted(index.covered_files()))
    return [dict(answer) for answer in answers if answer is not None]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.2f} µs" if value < 0.01 else f"{value:.3f} ms"


def profile_text(answer: dict[str, Any]) -> list[str]:
    out = [f"run {answer['run_id']}"]
    for graph in answer["graphs"]:
        speedup = f"{graph['speedup']:.2f}x" if graph.get("speedup") else "-"
        out.append(f"  {graph['graph_id']}  eager {_ms(graph['eager_ms'])}  compiled {_ms(graph['compiled_ms'])}  "
                   f"speedup {speedup}  ({graph['device']})")
        for kernel in graph["kernels"]:
            source = kernel["source"]
            where = f"{Path(path_of(source['uri'])).name}:{source['line'] + 1}" if source else "-"
            out.append(f"    {kernel['percent']:5.1f}%  {_ms(kernel['total_ms']):>11}  {kernel['calls']:>4}x  "
                       f"{kernel['name']} ({kernel['kind']})  {where}")
    if answer["lines"]:
        out.append("  your lines by cost:")
        out += [f"    {line['percent']:5.1f}%  {line['file']}:{line['line'] + 1}  {line['code']}  "
                f"<- {', '.join(line['kernels'])}" for line in answer["lines"]]
    return out


def _file_lines(uri: str) -> list[str]:
    try:
        return Path(path_of(uri)).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def kernel_text(answer: dict[str, Any]) -> list[str]:
    """Each source line and the generated lines it became, with their texts (Compiler Explorer's bands)."""
    source, generated = _file_lines(answer["source_uri"]), _file_lines(answer["generated_uri"])
    name = Path(path_of(answer["source_uri"])).name
    out = [f"{path_of(answer['source_uri'])}  ->  {path_of(answer['generated_uri'])}  (run {answer['run_id']}, "
           f"{answer['graph_id']})"]
    for link in answer["links"]:
        line = link["source_line"]
        out.append(f"  {name}:{line + 1}  {source[line].strip() if line < len(source) else ''}")
        out += [f"      output_code.py:{n + 1}  {generated[n].strip() if n < len(generated) else ''}"
                for n in link["generated_lines"]]
    return out


# view name -> (the answers, one answer's text)
VIEWS = {"profile": (profile_views, profile_text), "kernel": (kernel_views, kernel_text)}


def print_view(view: str, folder: str, as_json: bool) -> int:
    path = Path(folder)
    if not path.is_dir():
        print(f"{folder}: not a directory")
        return 2
    answers_of, text_of = VIEWS[view]
    answers = answers_of(build_index(path))
    if as_json:
        print(json.dumps(answers, indent=1))
        return 0
    if not answers:
        print(f"no {'profiled runs' if view == 'profile' else 'compiled source files'} under {path}")
    for answer in answers:
        print("\n".join(text_of(answer)))
    return 0
