"""`jigcmd run`: one command, once, through exactly the path the server uses."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import anyio
import msgspec

from jigcmd.assembly import STARTUP_ERRORS, FrontSettings, open_service
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport

__all__ = ["read_candidate", "run"]

_EXIT_EVIDENCE, _EXIT_INVALID, _EXIT_FAILED, _EXIT_STOPPED = 0, 2, 3, 4


def read_candidate(directory: Path) -> dict[str, str]:
    """Every regular file under `directory`, by relative POSIX path, decoded as UTF-8."""
    files: dict[str, str] = {}
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            if not stat.S_ISREG(path.lstat().st_mode):
                raise ValueError(
                    f"{relative}: not a regular file (symlinks and devices are not candidate text)"
                )
            try:
                files[relative] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{relative}: not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from exc
    return files


def run(
    settings: FrontSettings,
    command: str,
    *,
    files_dir: Path,
    stdin_file: Path | None,
    args: list[str],
    as_json: bool,
) -> int:
    """Run and print the evidence; the exit status says what happened, never the candidate's."""
    try:
        files = read_candidate(files_dir)
        stdin = stdin_file.read_bytes().decode("utf-8") if stdin_file is not None else None
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"jigcmd run: {exc}\n")
        return _EXIT_INVALID
    request: dict[str, object] = {"command": command, "files": files}
    if args:
        request["args"] = args
    if stdin is not None:
        request["stdin"] = stdin
    return anyio.run(_run, settings, request, as_json)


async def _run(settings: FrontSettings, request: dict[str, object], as_json: bool) -> int:
    try:
        async with open_service(settings) as assembly:
            try:
                result = await assembly.service.run(
                    request, operation_id="cli", deadline_unix_ms=None, cancel=anyio.Event()
                )
            except JigError as exc:
                return _report_failure(exc, as_json)
    except STARTUP_ERRORS as exc:
        sys.stderr.write(f"jigcmd run: {exc}\n")
        return _EXIT_INVALID
    _print(result.evidence, result.report, as_json)
    return _EXIT_EVIDENCE


def _report_failure(exc: JigError, as_json: bool) -> int:
    sys.stderr.write(f"jigcmd run: {exc.code.value}: {exc.message}\n")
    evidence = (exc.details or {}).get("command")
    if evidence is not None:
        if as_json:
            sys.stdout.write(json.dumps(evidence, ensure_ascii=False) + "\n")
        else:
            _print(msgspec.convert(evidence, Evidence), None, as_json=False)
    if exc.code == Code.INVALID_INPUT:
        return _EXIT_INVALID
    if exc.code in (Code.DEADLINE_EXCEEDED, Code.CANCELLED):
        return _EXIT_STOPPED
    return _EXIT_FAILED


def _print(evidence: Evidence, report: ResourceReport | None, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(msgspec.json.encode(evidence).decode() + "\n")
        return
    ended = (
        f"exit code {evidence.exit_code}"
        if evidence.exit_code is not None
        else f"signal {evidence.signal}"
    )
    lines = [
        f"command:    {evidence.command} ({' '.join(evidence.invocation)})",
        f"candidate:  {evidence.candidate_digest}",
        f"ended:      {ended} (stop reason: {evidence.stop_reason}, cleanup: {evidence.cleanup})",
    ]
    if report is not None:
        memory = (
            "n/a"
            if report.peak_memory_bytes is None
            else f"{report.peak_memory_bytes / 2**20:.1f} MiB"
        )
        cpu = "n/a" if report.cpu_ms is None else f"{report.cpu_ms:.1f} ms"
        lines.append(
            f"resources:  wall {report.wall_ms:.1f} ms (setup {report.setup_ms:.1f} ms), "
            f"cpu {cpu}, peak memory {memory}, oom killed {report.oom_killed}, "
            f"pids limit hit {report.pids_limit_hit}"
        )
    for name, stream in (("stdout", evidence.stdout), ("stderr", evidence.stderr)):
        note = " (truncated)" if stream.truncated else ""
        lines.append(f"--- {name}{note} ---")
        lines.append(stream.text.rstrip("\n"))
    sys.stdout.write("\n".join(lines) + "\n")
