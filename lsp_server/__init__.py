"""Kernel Lens language server: indexes debug directories and traces, serves LSP over stdio."""
