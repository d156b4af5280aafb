"""Workspaces with structured-trace logs for the language-server tests: the committed logs of
tests/fixtures/torch_trace, re-framed so their source paths point into the test's workspace."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torch_trace"
SCENARIOS = FIXTURES / "scenarios"
# where the scenarios were when the committed logs were made (their paths are absolute)
RECORDED_SCENARIOS = json.loads((FIXTURES / "paths.json").read_text())["scenarios"]
HAS_PAYLOAD = re.compile(r'"has_payload": "[0-9a-f]{32}"')
GLOG_DAY = re.compile(r"^(\[rank\d+\]:)?([VIWEC])(\d{4}) ")


def records(text: str) -> list[list[str]]:
    """A log's records: each a header line and its tab-indented payload lines."""
    found: list[list[str]] = []
    for line in text.split("\n"):
        if line.startswith("\t") and found:
            found[-1].append(line)
        elif line:
            found.append([line])
    return found


def frame(record: list[str]) -> str:
    """A record as the logger writes it, with `has_payload` the md5 of its (possibly edited) payload."""
    header, payload = record[0], record[1:]
    if payload:
        digest = hashlib.md5("\n".join(ln[1:] for ln in payload).encode("utf-8")).hexdigest()
        header = HAS_PAYLOAD.sub(f'"has_payload": "{digest}"', header)
    return "\n".join([header, *payload]) + "\n"


def remapped_log(source: Path, old_root: str, new_root: str, drop_kinds: tuple[str, ...] = (),
                 day: str | None = None) -> list[str]:
    """The framed records of `source` with paths moved, records of `drop_kinds` left out and, when `day`
    is given (MMDD), every glog prefix moved to that day (a later run)."""
    out = []
    for record in records(source.read_text()):
        if any(f'"{kind}"' in record[0] for kind in drop_kinds):
            continue
        record = [line.replace(old_root, new_root) for line in record]
        if day is not None:
            record[0] = GLOG_DAY.sub(lambda m: f"{m.group(1) or ''}{m.group(2)}{day} ", record[0], count=1)
        out.append(frame(record))
    return out


def trace_workspace(workspace: Path, scenario: str, log_folder: str = "torch_trace") -> Path:
    """`workspace/<scenario>.py` and `workspace/<log_folder>/` holding the scenario's committed logs."""
    workspace.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCENARIOS / f"{scenario}.py", workspace / f"{scenario}.py")
    logs = workspace / log_folder
    logs.mkdir(parents=True, exist_ok=True)
    for log in sorted((FIXTURES / scenario).glob("*.log")):
        (logs / log.name).write_text("".join(remapped_log(log, RECORDED_SCENARIOS, str(workspace))))
    return logs


def line_of(script: Path, text: str) -> int:
    """0-based line of the first line containing `text`."""
    return next(i for i, ln in enumerate(script.read_text().splitlines()) if text in ln)
