"""The tools around the pipeline: accuracy checks, profiling, saved tensors, the minifier, test generation, run
diffs, and the readers of real Inductor's output. They import the pipeline and the machine; nothing there imports them."""
