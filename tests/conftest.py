"""Shared test setup: a fresh kernel cache per test session, so tests exercise real g++ builds."""
import os
import tempfile

_CACHE = tempfile.mkdtemp(prefix="lens-test-cache-")
os.environ.setdefault("LENS_CACHE_DIR", _CACHE)
