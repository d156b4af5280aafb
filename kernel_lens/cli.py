"""`kernel-lens`: the compiler's commands (compiler/cli.py) and the language server's reports (`index`, `trace`:
lsp_server/__main__.py's REPORTS), in one process; `compile` also keeps a GPU run's Triton cache entries beside
its debug dir (lsp_server/loading/keep_triton.py). The composition root: the only module that imports both
packages, which never import each other."""
from __future__ import annotations

import sys

from compiler import cli
from lsp_server.__main__ import REPORTS
from lsp_server.loading.keep_triton import keep_after_compile


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, reports=REPORTS, run_hooks=(keep_after_compile,))


if __name__ == "__main__":
    sys.exit(main())
