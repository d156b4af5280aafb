"""The files of one graph's folder `<run>/lens/<graph_id>/` (docs/debug-directory.md) and of the run around it."""
from __future__ import annotations

LENS_FOLDER = "lens"  # <run>/lens/<graph_id>/ ; real Inductor's graphs sit in <run>/torchinductor/
INDUCTOR_FOLDER = "torchinductor"

FX_GRAPH_READABLE = "fx_graph_readable.py"
FX_GRAPH_RUNNABLE = "fx_graph_runnable.py"
FX_GRAPH_TRANSFORMED = "fx_graph_transformed.py"
IR_PRE_FUSION = "ir_pre_fusion.txt"
IR_POST_FUSION = "ir_post_fusion.txt"
OUTPUT_CODE = "output_code.py"
KERNEL_MAP = "kernel_map.json"
SYMBOLS = "symbols.json"
WHY = "why.json"
KERNEL_PLANS = "kernel_plans.json"
NOTES = "notes.txt"
VECTORIZATION = "vectorization.txt"
COMPILE_ERROR = "compile_error.json"
ACCURACY = "accuracy.json"
PROFILE = "profile.json"
TRACE = "trace.json"
TENSORS_INPUTS = "tensors/inputs.pt"  # (fx_graph_runnable.py loads it when present)
TENSORS_OUTPUTS = "tensors/outputs.pt"
TENSORS_MANIFEST = "tensors/manifest.json"
TENSORS_README = "tensors/README.txt"
