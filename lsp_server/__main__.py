"""`python -m lsp_server` serves LSP over stdio; `python -m lsp_server index DIR [--json]` prints the index."""
from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "index":
        from .index_report import print_index
        parser = argparse.ArgumentParser(prog="python -m lsp_server index",
                                         description="Print what the language server indexes for DIR.")
        parser.add_argument("dir")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        options = parser.parse_args(argv[1:])
        return print_index(options.dir, options.json)
    if argv:
        print(f"usage: python -m lsp_server [index DIR [--json]] (got {' '.join(argv)!r})", file=sys.stderr)
        return 2
    from .server import build_server
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    build_server().start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
