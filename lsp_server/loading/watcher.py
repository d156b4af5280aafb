"""Watches debug roots and structured-trace folders with watchdog and reports changes, debounced, with retries.

Knows nothing about LSP: it calls `on_change(paths)` from its own thread, where each path is a run folder,
a trace log that changed, or a whole root (created/deleted); `on_change` returns the paths to retry.
Below each workspace folder it also notices `torch_compile_debug/` and `torch_trace/` folders created at any
depth (one recursive watch per top-level folder that is not skipped: see `discovery.py`) and reports each
once to `on_found(kind, folder)` before its first change. A torch.profiler trace (`*.pt.trace.json`) written,
replaced or deleted anywhere it watches, or in the files and folders `kernelLens.profilerTraces` names, is
reported as its own path (a named folder created or deleted: the folder).
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from lsp_server.loading.discovery import (
    DEBUG_DIR_NAME,
    TRACE_DIR_NAME,
    discover,
    enclosing_found_dir,
    is_environment,
    skipped_name,
)
from lsp_server.loading.gpu_profile import walk_traces
from lsp_server.parsers.profiler_trace import TRACE_SUFFIX

log = logging.getLogger(__name__)
RETRY_DELAY_S = 0.25
POLL_INTERVAL_S = 0.1  # fallback when the system's inotify instances/watches run out
# Reading a file raises opened/closed_no_write events: reacting to those would re-read forever.
CHANGE_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed"})
ROOT_EVENTS = frozenset({"created", "deleted", "moved"})
MAX_RETRIES = 8
MAX_SUBTREE_WATCHES = 64  # top-level folders watched one by one; more: the workspace folder recursively


class RunWatcher(FileSystemEventHandler):
    def __init__(self, debug_dirs: list[Path], on_change: Callable[[set[Path]], set[Path]],
                 debounce_s: float = 0.05, trace_dirs: list[Path] | None = None,
                 workspaces: list[Path] | None = None,
                 on_found: Callable[[str, Path], None] | None = None,
                 profiler_traces: list[Path] | None = None) -> None:
        self.profiler_traces = list(profiler_traces or [])  # named trace files or folders (absolute)
        self.debug_dirs = [d.resolve() if d.exists() else d.absolute() for d in debug_dirs]
        self.trace_dirs = [d.resolve() if d.exists() else d.absolute() for d in trace_dirs or []]
        self.workspaces = [w.resolve() for w in workspaces or [] if w.is_dir()]
        self.subtrees: list[Path] = []  # recursively watched folders below the workspaces
        self.on_change = on_change
        self.on_found = on_found
        self.debounce_s = debounce_s
        self.observer: BaseObserver = Observer()
        self.polling: PollingObserver | None = None
        self.watches: dict[Path, tuple[BaseObserver, object]] = {}
        self.pending: set[Path] = set()
        self.retries: dict[Path, int] = {}
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.setup: threading.Thread | None = None

    def start(self) -> None:
        """The roots' watches now; the workspaces' (thousands of folders: ~0.1 s per 1,000) in a thread, which
        then walks the workspaces again for what was created meanwhile."""
        self.observer.daemon = True
        self.observer.start()
        self.setup = threading.Thread(target=self.watch_workspaces, name="kernel-lens-workspace-watch", daemon=True)
        self.setup.start()
        roots = self.debug_dirs + self.trace_dirs
        for parent in dict.fromkeys(root.parent for root in roots):  # sees a root created after start
            if parent.is_dir() and not self.covered(parent):
                self.add_watch(parent, recursive=False)
        for root in roots:
            self.watch_debug_dir(root)
        for named in self.profiler_traces:
            self.watch_named_trace(named)

    def watch_named_trace(self, named: Path) -> None:
        """A named folder recursively (and its parent, for its creation); a named file through its folder."""
        if named.is_dir():
            self.watch_debug_dir(named)
        folder = named.parent
        if folder.is_dir() and not self.covered(folder) and folder not in self.watches:
            added = self.add_watch(folder, recursive=False)
            if added is not None:
                self.watches[folder] = added

    def stop(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
        for observer in (self.observer, self.polling):
            if observer is not None:
                observer.stop()

    def add_watch(self, folder: Path, recursive: bool, poll: bool = True) -> tuple[BaseObserver, object] | None:
        """inotify first; polling when the system's inotify limits are reached (never for a workspace subtree:
        polling a whole tree costs too much; `rediscover` is its fallback)."""
        try:
            return self.observer, self.observer.schedule(self, str(folder), recursive=recursive)
        except OSError as exc:
            log.warning("inotify watch on %s failed (%s)%s", folder, exc, "; polling instead" if poll else "")
        if not poll:
            return None
        if self.polling is None:
            self.polling = PollingObserver(timeout=POLL_INTERVAL_S)
            self.polling.daemon = True
            self.polling.start()
        try:
            return self.polling, self.polling.schedule(self, str(folder), recursive=recursive)
        except OSError as exc:
            log.warning("cannot watch %s: %s", folder, exc)
            return None

    def covered(self, folder: Path) -> bool:
        """Whether a recursive workspace watch already reports changes below `folder`."""
        return any(tree == folder or tree in folder.parents for tree in self.subtrees)

    def watch_workspaces(self) -> None:
        for workspace in self.workspaces:
            self.watch_workspace(workspace)
        for root, (observer, watch) in list(self.watches.items()):
            # a root's own watch, now also reported through a workspace watch; a root that is itself a watched
            # subtree shares that watch (watchdog keys watches by path): unscheduling it would blind both
            if self.covered(root) and root not in self.subtrees:
                self.watches.pop(root, None)
                try:
                    observer.unschedule(watch)
                except (KeyError, ValueError):
                    pass
        self.rediscover()

    def watch_workspace(self, workspace: Path) -> None:
        """The folder itself (new top-level folders) and each top-level folder that is not skipped, recursively."""
        self.add_watch(workspace, recursive=False)
        try:
            children = [Path(e.path) for e in os.scandir(workspace)
                        if e.is_dir(follow_symlinks=False) and not skipped_name(e.name)]
        except OSError:
            return
        if len(children) > MAX_SUBTREE_WATCHES:
            children = [workspace]
        for child in children:
            self.watch_subtree(child)

    def watch_subtree(self, folder: Path) -> None:
        if self.covered(folder) or is_environment(folder):
            return
        if self.add_watch(folder, recursive=True, poll=False) is not None:
            self.subtrees = [*self.subtrees, folder]

    def watch_debug_dir(self, debug_dir: Path) -> None:
        if self.covered(debug_dir):
            return  # its events come through the workspace watch
        old = self.watches.pop(debug_dir, None)
        if old is not None:
            observer, watch = old
            try:
                observer.unschedule(watch)
            except (KeyError, ValueError):
                pass
        if debug_dir.is_dir():
            added = self.add_watch(debug_dir, recursive=True)
            if added is not None:
                self.watches[debug_dir] = added

    # -- events (watchdog thread) ---------------------------------------------------------------------
    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in CHANGE_EVENTS:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                self.note(Path(raw if isinstance(raw, str) else raw.decode()), event.event_type)

    def note(self, path: Path, event_type: str) -> None:
        if path.name.endswith(TRACE_SUFFIX):
            self.schedule({path})
            return
        if path in self.profiler_traces:  # a named file, or a named folder created, moved or deleted
            if event_type in ROOT_EVENTS or not path.is_dir():
                self.watch_named_trace(path)
                self.schedule({path})
            return
        if self.note_trace(path, event_type):
            return
        for debug_dir in self.debug_dirs:
            if path == debug_dir:
                if event_type not in ROOT_EVENTS:
                    return  # the folder's own mtime changes with every child: not a reason to rescan
                if debug_dir.is_dir():
                    self.watch_debug_dir(debug_dir)
                self.schedule({debug_dir})
                return
            try:
                relative = path.relative_to(debug_dir)
            except ValueError:
                continue
            if relative.parts and not relative.parts[0].startswith("."):  # skip writers' staging folders
                self.schedule({debug_dir / relative.parts[0]})
            return
        self.note_workspace(path, event_type)

    def note_workspace(self, path: Path, event_type: str) -> None:
        """A change below a workspace outside the known roots: a new top-level folder to watch, or a path in a
        `torch_compile_debug` / `torch_trace` folder not seen before."""
        if DEBUG_DIR_NAME not in path.parts and TRACE_DIR_NAME not in path.parts:
            if event_type in ROOT_EVENTS and path.parent in self.workspaces and not skipped_name(path.name) \
                    and path.is_dir() and not self.covered(path):
                self.watch_subtree(path)
                self.report_found(discover(path))  # what was written before the watch began
                traces = set(walk_traces(path))
                if traces:
                    self.schedule(traces)
            return
        for workspace in self.workspaces:
            found = enclosing_found_dir(path, workspace)
            if found is not None and found[1].is_dir():
                self.found(*found)
                return

    def found(self, kind: str, folder: Path) -> None:
        """A debug or trace folder not known before: tell the owner, watch it unless covered, rescan it."""
        with self.lock:
            known = self.debug_dirs if kind == "debug" else self.trace_dirs
            if folder in known:
                return
            if kind == "debug":
                self.debug_dirs = [*self.debug_dirs, folder]
            else:
                self.trace_dirs = [*self.trace_dirs, folder]
        if self.on_found is not None:
            self.on_found(kind, folder)
        self.watch_debug_dir(folder)
        self.schedule({folder})

    def report_found(self, *walks) -> None:
        for walk in walks:
            for folder in walk.debug_dirs:
                self.found("debug", folder)
            for folder in walk.trace_dirs:
                self.found("trace", folder)

    def rediscover(self) -> None:
        """Walk every workspace again for folders created where no watch could see them."""
        self.report_found(*(discover(workspace) for workspace in self.workspaces))

    def note_trace(self, path: Path, event_type: str) -> bool:
        """A trace log is reported itself (it is read incrementally); a created/deleted root as a whole."""
        for root in self.trace_dirs:
            if path == root:
                if event_type in ROOT_EVENTS or root.suffix == ".log":
                    if root.is_dir():
                        self.watch_debug_dir(root)
                    self.schedule({root})
                return True
            if root in path.parents:
                if path.suffix == ".log":
                    self.schedule({path})
                elif event_type in ROOT_EVENTS and path.parent == root:
                    self.schedule({root})  # a sub-folder of logs appeared or went
                return True
        return False

    def rescan_roots(self, delay_s: float) -> None:
        """After `delay_s` (and the workspace watches): report every root as changed (each is then rescanned
        whole): folders created while the watches were being added can slip past both watch and first scan."""
        timer = threading.Timer(delay_s, self.settle)
        timer.daemon = True
        timer.start()

    def settle(self) -> None:
        if self.setup is not None:
            self.setup.join()
        roots = {d for d in self.debug_dirs if d.is_dir()} | {d for d in self.trace_dirs if d.exists()}
        for root in roots:
            if root not in self.watches and root.is_dir():
                self.watch_debug_dir(root)  # created between start() and now
        if roots:
            self.schedule(roots)

    def schedule(self, paths: set[Path], delay_s: float | None = None) -> None:
        with self.lock:
            self.pending |= paths
            if self.timer is not None:
                self.timer.cancel()
            self.timer = threading.Timer(self.debounce_s if delay_s is None else delay_s, self.flush)
            self.timer.daemon = True
            self.timer.start()

    def flush(self) -> None:
        with self.lock:
            paths, self.pending, self.timer = self.pending, set(), None
        if not paths:
            return
        try:
            retry = self.on_change(paths)
        except Exception:  # the watcher must survive anything the indexer does
            log.exception("indexing %s failed", sorted(map(str, paths)))
            retry = set()
        for path in paths - retry:
            self.retries.pop(path, None)
        again = set()
        for path in retry:
            self.retries[path] = self.retries.get(path, 0) + 1
            if self.retries[path] <= MAX_RETRIES:
                again.add(path)
        if again:
            self.schedule(again, RETRY_DELAY_S)
