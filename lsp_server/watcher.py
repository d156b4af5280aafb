"""Watches debug roots and structured-trace folders with watchdog and reports changes, debounced, with retries.

Knows nothing about LSP: it calls `on_change(paths)` from its own thread, where each path is a run folder,
a trace log that changed, or a whole root (created/deleted); `on_change` returns the paths to retry.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

log = logging.getLogger(__name__)
RETRY_DELAY_S = 0.25
POLL_INTERVAL_S = 0.1  # fallback when the system's inotify instances/watches run out
# Reading a file raises opened/closed_no_write events: reacting to those would re-read forever.
CHANGE_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed"})
ROOT_EVENTS = frozenset({"created", "deleted", "moved"})
MAX_RETRIES = 8


class RunWatcher(FileSystemEventHandler):
    def __init__(self, debug_dirs: list[Path], on_change: Callable[[set[Path]], set[Path]],
                 debounce_s: float = 0.05, trace_dirs: list[Path] | None = None) -> None:
        self.debug_dirs = [d.resolve() if d.exists() else d.absolute() for d in debug_dirs]
        self.trace_dirs = [d.resolve() if d.exists() else d.absolute() for d in trace_dirs or []]
        self.on_change = on_change
        self.debounce_s = debounce_s
        self.observer: BaseObserver = Observer()
        self.polling: PollingObserver | None = None
        self.watches: dict[Path, tuple[BaseObserver, object]] = {}
        self.pending: set[Path] = set()
        self.retries: dict[Path, int] = {}
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def start(self) -> None:
        self.observer.daemon = True
        self.observer.start()
        roots = self.debug_dirs + self.trace_dirs
        for parent in dict.fromkeys(root.parent for root in roots):  # sees a root created after start
            if parent.is_dir():
                self.add_watch(parent, recursive=False)
        for root in roots:
            self.watch_debug_dir(root)

    def stop(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
        for observer in (self.observer, self.polling):
            if observer is not None:
                observer.stop()

    def add_watch(self, folder: Path, recursive: bool) -> tuple[BaseObserver, object] | None:
        """inotify first; polling when the system's inotify limits are reached."""
        try:
            return self.observer, self.observer.schedule(self, str(folder), recursive=recursive)
        except OSError as exc:
            log.warning("inotify watch on %s failed (%s); polling instead", folder, exc)
        if self.polling is None:
            self.polling = PollingObserver(timeout=POLL_INTERVAL_S)
            self.polling.daemon = True
            self.polling.start()
        try:
            return self.polling, self.polling.schedule(self, str(folder), recursive=recursive)
        except OSError as exc:
            log.warning("cannot watch %s: %s", folder, exc)
            return None

    def watch_debug_dir(self, debug_dir: Path) -> None:
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
        """Report every root as changed after `delay_s` (each is then rescanned whole)."""
        roots = {d for d in self.debug_dirs if d.is_dir()} | {d for d in self.trace_dirs if d.exists()}
        for root in roots:
            if root not in self.watches and root.is_dir():
                self.watch_debug_dir(root)  # created between start() and now
        if roots:
            self.schedule(roots, delay_s)

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
