"""Runs code cells in a real Jupyter kernel (ipykernel through jupyter_client) started in WORKSPACE with
LENS_DEBUG=1, and writes them with their execution counts as WORKSPACE/NAME.ipynb, as Jupyter saves a notebook.
Usage: python run_notebook.py WORKSPACE NAME CELLS_JSON (a list of cell texts). Prints the notebook's path."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from jupyter_client import KernelManager


def run_cells(workspace: Path, cells: list[str]) -> list[int]:
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(workspace), env={**os.environ, "LENS_DEBUG": "1"})
    client = manager.client()
    client.start_channels()
    counts = []
    try:
        client.wait_for_ready(timeout=120)
        for code in cells:
            reply = client.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                raise SystemExit(f"cell failed: {reply['content'].get('evalue')}\n{code}")
            counts.append(reply["content"]["execution_count"])
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return counts


def notebook(cells: list[str], counts: list[int]) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": count, "id": f"cell{i}", "metadata": {}, "outputs": [],
                       "source": text.splitlines(keepends=True)} for i, (text, count) in enumerate(zip(cells, counts))],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


if __name__ == "__main__":
    workspace, name, cells = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    path = workspace / f"{name}.ipynb"
    path.write_text(json.dumps(notebook(cells, run_cells(workspace, cells)), indent=1))
    print(path)
