"""The program the tools' tests run for real: the bundled example (examples/foo1.py: `foo1` and
`scaled_softmax`; its `__main__` block does not run when a test loads it), and the `neg` codegen bug they
reproduce on purpose (an op override recorded in fx_graph_runnable.py)."""
from pathlib import Path

PROGRAM = (Path(__file__).resolve().parents[3] / "examples" / "foo1.py").read_text()
NEG_BUG = {"neg": "decltype({x})(2 * {x})"}
