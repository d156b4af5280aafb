"""`python -m lsp_server` serves LSP over stdio; `python -m lsp_server index DIR [--json]` prints the index;
`python -m lsp_server trace DIR [--json]` prints what a structured trace (TORCH_TRACE folder or log) says;
`profile-view` / `kernel-view DIR [--json]` print the editor's profile and kernel views."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable


def _print_index() -> Callable[[str, bool], int]:
    from lsp_server.reports.index_report import print_index
    return print_index


def _print_trace() -> Callable[[str, bool], int]:
    from lsp_server.reports.trace_view import print_trace
    return print_trace


def _print_view(view: str) -> Callable[[], Callable[[str, bool], int]]:
    def load() -> Callable[[str, bool], int]:
        from lsp_server.reports.views import print_view
        return lambda folder, as_json: print_view(view, folder, as_json)
    return load


# sub-command → (description, the printer, imported on use so `serve` starts fast)
REPORTS: dict[str, tuple[str, Callable[[], Callable[[str, bool], int]]]] = {
    "index": ("Print what the language server indexes for DIR.", _print_index),
    "trace": ("Print graph breaks, recompiles, failures and rank divergences of a structured trace "
              "(a TORCH_TRACE folder or one log).", _print_trace),
    "profile-view": ("Print the profile view of each profiled run under DIR: kernels by time, your lines by cost "
                     "(--json: the server's kernelLens.getProfile answers).", _print_view("profile")),
    "kernel-view": ("Print the kernel view of each source file compiled under DIR: each line and the generated "
                    "lines it became (--json: the server's kernelLens.linkedLines answers).", _print_view("kernel")),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in REPORTS:
        description, load = REPORTS[argv[0]]
        parser = argparse.ArgumentParser(prog=f"python -m lsp_server {argv[0]}", description=description)
        parser.add_argument("dir")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        try:
            options = parser.parse_args(argv[1:])
        except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
            return int(exc.code or 0)
        return load()(options.dir, options.json)
    if argv == ["--stdio"]:  # what LSP clients pass for the stdio transport: it is the only one
        argv = []
    if argv:
        print(f"usage: python -m lsp_server [--stdio | {{{','.join(REPORTS)}}} DIR [--json]] "
              f"(got {' '.join(argv)!r})", file=sys.stderr)
        return 2
    from lsp_server.server import build_server
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    build_server().start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
