"""Views of the index printed outside the editor (`kernel-lens index`, `kernel-lens trace`) or answered as one command
(`kernelLens.diffRuns`)."""
