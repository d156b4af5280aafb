"""The debug-directory format (docs/debug-directory.md): file names, typed records with their JSON, and the
tolerant JSON reading both sides share. The compiler writes through it, the language server and the compiler's
own tools read through it.

Architecture Invariant: this package imports nothing of ours (and not torch): `compiler` and `lsp_server`
import only it from each other (tests/lens_format/test_layering.py)."""
