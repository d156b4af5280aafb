"""Structured-trace logs (`TORCH_TRACE=dir`, what tlparse reads): the streaming reader, the per-compile model, the
payload parsers, the summary and findings."""
