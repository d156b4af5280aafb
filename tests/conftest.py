"""Shared test setup: a fresh kernel cache per test session, so tests exercise real g++ builds; removed when
the session ends (after any background precompiled-header build has finished)."""
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="lens-test-cache-")
_OWNED = os.environ.setdefault("LENS_CACHE_DIR", _CACHE) == _CACHE
if not _OWNED:
    os.rmdir(_CACHE)
# torch's AOTAutograd cache, which keeps lens's training graphs too (compiler/frontend/aot_cache.py): this session's own
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.environ["LENS_CACHE_DIR"], "torch"))


def pytest_sessionfinish(session, exitstatus):
    if not _OWNED:
        return
    try:
        from compiler.machine import pch
        pch.wait_for_builds()
    except ImportError:
        pass
    shutil.rmtree(_CACHE, ignore_errors=True)
