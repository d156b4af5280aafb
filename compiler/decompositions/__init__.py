"""The decomposition table AOTAutograd traces with: aten ops the lowering has no rule for, as ops it has."""
