"""The `kernel-lens` command: the one place that puts the compiler and the language server together."""
