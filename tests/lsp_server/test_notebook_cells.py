"""features/notebook_cells.py: cells matched to the files IPython compiled them under. The names are computed by
IPython's and ipykernel's own code (their compilers' naming functions), the rules on hand-made cells and files."""
from __future__ import annotations

from datetime import datetime

import pytest

from lsp_server.features.notebook_cells import Cell, CellFile, CellMap, match_cells, murmur2_x86

compiler = pytest.importorskip("ipykernel.compiler", reason="ipykernel is in the test extra")
compilerop = pytest.importorskip("IPython.core.compilerop")

CELL = "def f(x):\n    y = torch.relu(x)\n    return y * 2\n\ntorch.compile(f)(x)"
RECORDED = {2: "y = torch.relu(x)", 3: "return y * 2"}
T0, T1 = datetime(2026, 1, 1, 9), datetime(2026, 1, 1, 10)


def kernel_file(text: str, pid: int = 100) -> str:
    """The name ipykernel gives a cell of this text (its own function, in a kernel of pid `pid`)."""
    return f"/tmp/ipykernel_{pid}/{compiler.murmur2_x86(text, compiler.get_tmp_hash_seed())}.py"


@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "abcd", "abcde", CELL, "é→µ\r\n" * 7])
def test_the_hash_is_ipykernels(text: str):
    assert murmur2_x86(text) == compiler.murmur2_x86(text, compiler.get_tmp_hash_seed())


def test_a_cell_takes_the_file_its_text_hashes_to_and_after_a_restart_the_newest():
    old, new = CellFile(kernel_file(CELL, 100), T0, RECORDED), CellFile(kernel_file(CELL, 200), T1, RECORDED)
    assert match_cells([Cell("c0", CELL, 1)], [new, old]) == {"c0": new.path}
    assert match_cells([Cell("c0", CELL + " ", 1)], [old]) == {"c0": old.path}  # edited: by its lines


def test_an_edited_cell_takes_its_last_run_and_a_cell_never_run_nothing():
    first = CellFile(kernel_file(CELL), T0, RECORDED)
    second_text = CELL.replace("y * 2", "y * 3")
    second = CellFile(kernel_file(second_text), T1, {2: "y = torch.relu(x)", 3: "return y * 3"})
    edited = second_text.replace("relu", "gelu")  # edited after its second run: one of two lines left
    assert match_cells([Cell("c0", edited, 4)], [first, second]) == {"c0": second.path}
    # the cell as its second run: the first run is an older version of it, for no other cell to take
    assert match_cells([Cell("c0", second_text, 4), Cell("c1", CELL + "\n", 2)], [first, second]) == {
        "c0": second.path, "c1": first.path}
    assert match_cells([Cell("c0", second_text, 4), Cell("c1", CELL + "\n", None)], [first, second]) == {
        "c0": second.path}
    assert match_cells([Cell("c0", "def f(x):\n    return x", 1)], [first]) == {}  # not half its lines


def test_ipython_without_ipykernel_names_cells_by_count_and_sha1():
    name = compilerop.CachingCompiler().get_code_name(CELL, CELL, 7)  # IPython's own name for it
    file = CellFile(f"/work/{name}", T0, RECORDED)
    assert match_cells([Cell("c0", CELL, 7)], [file]) == {"c0": file.path}
    # edited since: the cell whose execution count is in the name, of two cells with the same lines
    assert match_cells([Cell("c0", CELL + "\n", 3), Cell("c1", CELL + "\n\n", 7)], [file]) == {"c1": file.path}


def test_cells_of_the_same_text_map_to_the_file_which_maps_to_the_last_run():
    file = CellFile(kernel_file(CELL), T0, RECORDED)
    cells = CellMap()
    assert cells.set([Cell("vscode-notebook-cell:/nb.ipynb#W1s%3D", CELL, 5), Cell("c0", CELL, 2)], [file])
    assert cells.file_of("vscode-notebook-cell:/nb.ipynb#W1s=") == file.path  # quoted or not
    assert cells.file_of("c0") == file.path
    assert cells.cell_of(file.path) == "vscode-notebook-cell:/nb.ipynb#W1s%3D"
    assert not cells.set([Cell("vscode-notebook-cell:/nb.ipynb#W1s%3D", CELL, 5), Cell("c0", CELL, 2)], [file])
    assert cells.set([], [file]) and cells.file_of("c0") is None and cells.cell_of(file.path) is None
