"""The language server: owns the index, settings and watcher, and registers one module per feature."""
from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import threading
from pathlib import Path
from typing import Callable

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter
from pygls.uris import to_fs_path

from lsp_server.features.notebook import NOTEBOOK_SYNC
from lsp_server.index import Index
from lsp_server.json_answer import json_converter
from lsp_server.loading.discovery import discover
from lsp_server.loading.gpu_profile import (
    is_trace_change,
    named_traces,
    retimed_runs,
    set_named_traces,
    trace_version,
)
from lsp_server.loading.inductor_build_errors import TLPARSE_DIR
from lsp_server.loading.run_loader import debug_dir_for_root, find_run_dirs, load_run
from lsp_server.loading.trace_loader import TRACE_DIR_NAME, TraceLoader, TraceUpdate
from lsp_server.loading.watcher import RunWatcher
from lsp_server.model import Run
from lsp_server.settings import Settings, parse_settings

SETTLE_RESCAN_S = 0.5  # after start: one more look at every root (see start_indexing)

log = logging.getLogger(__name__)

# Each module has `register(server)`; the table is the server's feature list.
FEATURE_MODULES = (
    "hover", "definition", "references", "code_lens", "inlay_hints", "document_symbols", "diagnostics",
    "code_actions", "commands", "linked_lines", "compiles", "notebook",
)


class KernelLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernel-lens", "0.1.0", converter_factory=json_converter(default_converter),
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.index = Index()
        self.settings = Settings()
        self.watcher: RunWatcher | None = None
        self.debug_dirs: list[Path] = []  # replaced, never mutated: the watcher thread adds found folders
        self.workspaces: list[Path] = []
        self.trace_loader = TraceLoader([])
        self.loop: asyncio.AbstractEventLoop | None = None
        self.index_changed_hooks: list = []  # callables run (in the loop thread) after each index update
        self.reported_problems: set[str] = set()
        self.index_lock = threading.Lock()

    # -- messages -------------------------------------------------------------------------------------
    def log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.window_log_message(types.LogMessageParams(kind, message))

    def show(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        self.window_show_message(types.ShowMessageParams(kind, message))

    # -- indexing ---------------------------------------------------------------------------------------
    def configure(self, params: types.InitializeParams) -> None:
        self.settings, problems = parse_settings(params.initialization_options)
        for problem in problems:
            self.show(f"Kernel Lens: {problem}")
        roots = [Path(to_fs_path(f.uri)) for f in (params.workspace_folders or []) if to_fs_path(f.uri)]
        if not roots and params.root_uri and to_fs_path(params.root_uri):
            roots = [Path(to_fs_path(params.root_uri))]
        workspace_roots = list(roots)
        self.workspaces = [root.absolute() for root in workspace_roots]
        roots += [Path(r).expanduser() for r in self.settings.debug_roots]
        trace_roots = [root.absolute() / TRACE_DIR_NAME for root in workspace_roots]
        for folder in self.settings.trace_dirs:
            path = Path(folder).expanduser()
            trace_roots.append(path if path.is_absolute() or not workspace_roots else workspace_roots[0] / path)
        self.trace_loader = TraceLoader(list(dict.fromkeys(p.resolve() if p.exists() else p.absolute()
                                                           for p in trace_roots)))
        set_named_traces([self.workspace_path(p, workspace_roots) for p in self.settings.profiler_traces])
        seen: list[Path] = []
        for root in roots:
            debug_dir = debug_dir_for_root(root.absolute())
            if debug_dir not in seen:
                seen.append(debug_dir)
        self.debug_dirs = seen

    @staticmethod
    def workspace_path(setting: str, workspace_roots: list[Path]) -> Path:
        """A path from the settings: `~` expanded, a relative one taken from the first workspace folder."""
        path = Path(setting).expanduser()
        return path if path.is_absolute() or not workspace_roots else (workspace_roots[0] / path).absolute()

    def start_indexing(self) -> None:
        """Watch first, then scan: a run written meanwhile is seen by one or the other. Folders created
        while recursive watches were being added can slip past both, so the roots are rescanned once
        more when the watcher has settled."""
        self.loop = asyncio.get_running_loop()
        self.discover_nested()
        if self.settings.watch:
            self.watcher = RunWatcher(self.debug_dirs, self.index_paths, self.settings.debounce_ms / 1000,
                                      self.trace_loader.roots, self.workspaces, self.add_found_root,
                                      named_traces())
            try:
                self.watcher.start()
            except OSError as exc:  # no watching: `kernelLens.reindex` still works
                self.show(f"Kernel Lens: cannot watch debug folders ({exc}); use the reindex command")
                self.watcher = None
        self.reindex_all(discover_first=False)
        if self.watcher is not None:
            self.watcher.rescan_roots(delay_s=SETTLE_RESCAN_S)

    def discover_nested(self) -> None:
        """`torch_compile_debug/` and `torch_trace/` folders at any depth below the workspace folders (a script
        run from a sub-folder writes them there)."""
        for workspace in self.workspaces:
            found = discover(workspace.resolve() if workspace.is_dir() else workspace)
            for kind, folders in (("debug", found.debug_dirs), ("trace", found.trace_dirs)):
                for folder in folders:
                    if self.add_found_root(kind, folder) and self.watcher is not None:
                        self.watcher.found(kind, folder)  # found by `reindex`: watch it from now on
            if found.truncated:
                self.log(f"Kernel Lens: stopped looking for debug folders below {workspace} after "
                         f"{found.listed} folders; add deeper ones to kernelLens.debugRoots")

    def add_found_root(self, kind: str, folder: Path) -> bool:
        """A debug or trace folder found below a workspace (any thread; the lists are replaced, not mutated);
        False when it was known."""
        if kind == "trace":
            return self.trace_loader.add_root(folder)
        if any(folder == known or folder == known.resolve() for known in self.debug_dirs):
            return False
        self.debug_dirs = [*self.debug_dirs, folder]
        return True

    def reindex_all(self, discover_first: bool = True) -> int:
        """Synchronous full scan (loop thread), after looking for new nested debug folders."""
        if discover_first:
            self.discover_nested()
        loaded: list[tuple[Path, Run | None]] = []
        for debug_dir in self.debug_dirs:
            loaded += [(d, load_run(d)) for d in find_run_dirs(debug_dir)]
        trace = self.read_traces(lambda: self.trace_loader.refresh_all(every_run=True))
        with self.index_lock:
            selected = self.index.selected_run_id  # the user's choice outlives a rescan when its run does
            for run_id in list(self.index.views):
                self.index.remove_run(run_id)
            for _, run in loaded:
                if run is not None:
                    self.index.put_run(run)
            self.apply_trace(trace)
            self.index.select(selected if selected in self.index.views else None)
        self.after_index_change([run for _, run in loaded if run is not None])
        return len(self.index.views)

    def index_paths(self, paths: set[Path]) -> set[Path]:
        """Watcher thread: parse changed runs here, apply them in the loop thread; returns paths to retry."""
        loaded: list[tuple[Path, Run | None]] = []
        rescanned: list[Path] = []
        trace_paths = {path for path in paths if self.trace_loader.owns(path)}
        trace = self.read_traces(lambda: self.trace_loader.refresh_paths(trace_paths)) if trace_paths else None
        profiler_paths = {path for path in paths - trace_paths if is_trace_change(path)}
        retry: set[Path] = set()
        if profiler_paths:  # a torch.profiler trace changed: the runs it may time are read again
            with self.index_lock:
                runs = [view.run for view in self.index.views.values()]
            versions = {path: trace_version(path) for path in profiler_paths}
            retimed, retry = retimed_runs(profiler_paths, runs)
            for old in retimed:
                run = load_run(old.path, old.id)
                if run is not None:  # a structured trace's run keeps what its loader set
                    run.kind, run.pid, run.time = old.kind, old.pid, old.time
                loaded.append((old.path, run))
            # a trace replaced while its runs were read: some graphs saw one version, some the other
            retry |= {path for path, version in versions.items() if trace_version(path) != version}
        for path in paths - trace_paths - profiler_paths:
            if path in self.debug_dirs:
                rescanned.append(path)
                loaded += [(d, load_run(d)) for d in find_run_dirs(path)]
            elif path.name == TLPARSE_DIR and path.parent in self.debug_dirs:
                # the trace TORCH_COMPILE_DEBUG writes beside the runs grew (a build failure is logged after
                # the run's files): the newest run reads it again
                loaded += [(d, load_run(d)) for d in find_run_dirs(path.parent)[-1:]]
            else:
                loaded.append((path, load_run(path)))
        retry |= {path for path, run in loaded if run is not None and run.incomplete}
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.apply_loaded, loaded, rescanned, trace)
        return retry

    def read_traces(self, read: Callable[[], TraceUpdate]) -> TraceUpdate | None:
        try:
            return read()
        except Exception as exc:  # a trace reader bug must not stop debug-directory indexing
            log.exception("reading structured traces failed")
            if self.loop is not None and not self.loop.is_closed():  # may run in the watcher thread
                self.loop.call_soon_threadsafe(self.log, f"Kernel Lens: reading structured traces failed: {exc!r}",
                                               types.MessageType.Error)
            return None

    def apply_trace(self, trace: TraceUpdate | None) -> None:
        """Index lock held: the new trace facts, and the trace runs that changed."""
        if trace is None:
            return
        self.index.trace = trace.facts
        for folder in trace.removed:
            old = self.index.run_at_path(folder)
            if old is not None:
                self.index.remove_run(old.id)
        for run in trace.runs:
            self.index.put_run(run)

    def apply_loaded(self, loaded: list[tuple[Path, Run | None]], rescanned: list[Path],
                     trace: TraceUpdate | None = None) -> None:
        with self.index_lock:
            self.apply_trace(trace)
            present = {path.absolute() for path, _ in loaded}
            for debug_dir in rescanned:
                for view in list(self.index.views.values()):
                    if view.run.path.parent == debug_dir and view.run.path.absolute() not in present:
                        self.index.remove_run(view.run.id)
            for path, run in loaded:
                if run is None:
                    old = self.index.run_at_path(path)
                    if old is not None:
                        self.index.remove_run(old.id)
                else:
                    self.index.put_run(run)
        self.after_index_change([run for _, run in loaded if run is not None])

    def after_index_change(self, runs: list[Run]) -> None:
        # The index is tens of thousands of long-lived objects: a full collection walking them all paused
        # requests for ~100 ms (hover p99). Frozen, they are left out of collections; a replaced run's
        # objects hold no cycles (its references only point down), so reference counting still frees them.
        gc.freeze()
        for run in runs:
            for problem in run.problems():
                if problem not in self.reported_problems and not run.incomplete:
                    self.reported_problems.add(problem)
                    self.log(f"Kernel Lens: {problem}", types.MessageType.Warning)
                    if "unsupported version" in problem:
                        self.show(f"Kernel Lens: {problem}")
        for hook in self.index_changed_hooks:
            try:
                hook()
            except Exception as exc:  # one feature's failure is never fatal
                log.exception("index hook failed")
                self.log(f"Kernel Lens: index hook failed: {exc!r}", types.MessageType.Error)


def build_server() -> KernelLensServer:
    server = KernelLensServer()

    @server.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        server.configure(params)

    @server.feature(types.INITIALIZED)
    def on_initialized(params: types.InitializedParams) -> None:
        server.start_indexing()

    @server.feature(types.SHUTDOWN)
    def on_shutdown(params: None) -> None:
        if server.watcher is not None:
            server.watcher.stop()

    for name in FEATURE_MODULES:
        importlib.import_module(f"{__package__}.features.{name}").register(server)
    return server
