"""Evaluating a TypeScript Binding: the bundled Bun, inside an envelope, through the Executor.

The plan is an ordinary candidate plan (`jigcmd.policy.planner`): no network, the tree
read-only and holding only the Binding, the project's `jig.ts` and jigcmd's `@jigging/jig`
(`jigshim/`), the usual limits, and the usual 10 s ceiling. What comes back is read by
`jigcmd.policy.bindingscript`; only the JSON its definers yielded goes on to the rules.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.command.bindingfile import (
    LoadedBinding,
    ScriptResult,
    is_script,
    load_binding,
    project_root,
)
from jigcmd.command.failures import envelope_error
from jigcmd.command.runtime import BUN_TARGET, BunBinary, find_runtime
from jigcmd.envelope.api import EnvelopeFailure, Executor
from jigcmd.plan import Limits
from jigcmd.policy.binding import BindingError
from jigcmd.policy.bindingscript import (
    EVALUATOR,
    JIG_NAMES,
    Evaluation,
    binding_id,
    check_listed,
    evaluation_files,
    read_evaluation,
)
from jigcmd.policy.digests import sha256_text
from jigcmd.policy.planner import CEILING_SECONDS, candidate_plan

__all__ = ["ScriptSource", "evaluate_script", "load_any_binding", "read_script"]

_SHIM_FILES = ("index.js", "evaluate.js", "package.json")


@dataclass(frozen=True)
class ScriptSource:
    """A script Binding read from disk: its project, its path and text there, and `jig.ts`."""

    path: Path
    root: Path
    relative: str
    text: str
    digest: str
    jig: tuple[str, str] | None
    jig_path: Path | None


def read_script(path: Path) -> ScriptSource:
    """Read the Binding and its project's `jig.ts`; refuse what cannot be evaluated as text."""
    source = str(path)
    binding_id(path.name, path.stem, source=source)
    root = project_root(path)
    relative = path.resolve().relative_to(root.resolve()).as_posix()
    data = _read(path, source)
    jig_path = next((root / name for name in JIG_NAMES if (root / name).is_file()), None)
    jig = None
    if jig_path is not None and jig_path.resolve() != path.resolve():
        jig = (jig_path.name, _text(_read(jig_path, str(jig_path)), str(jig_path)))
    return ScriptSource(
        path=path,
        root=root,
        relative=relative,
        text=_text(data, source),
        digest=sha256_text(data),
        jig=jig,
        jig_path=jig_path if jig is not None else None,
    )


def _read(path: Path, source: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BindingError(
            f"cannot be read: {exc.strerror}", pointer="", rule="binding-file", source=source
        ) from exc


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BindingError(
            f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
            pointer="",
            rule="binding-file",
            source=source,
        ) from None


def _shim() -> dict[str, str]:
    # Only a TypeScript Binding needs the shim: a server of a TOML or JSON one never carries
    # importlib.resources (5 modules).
    from importlib import resources  # noqa: PLC0415 - see the comment above

    package = resources.files("jigcmd.command") / "jigshim"
    return {name: (package / name).read_text(encoding="utf-8") for name in _SHIM_FILES}


async def evaluate_script(
    path: Path, executor: Executor, runtime: BunBinary, cancel: CancelSignal | None = None
) -> ScriptResult:
    """Evaluate the Binding in a fresh envelope; raises `BindingError` saying why it cannot."""
    script = await anyio.to_thread.run_sync(read_script, path)
    source = str(path)
    shim = await anyio.to_thread.run_sync(_shim)
    files = evaluation_files((script.relative, script.text), script.jig, shim, source=source)
    args = (script.relative,) if script.jig is None else (script.relative, script.jig[0])
    plan = candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=await anyio.to_thread.run_sync(lambda: runtime.binds),
        kind="run",
        paths=(EVALUATOR,),
        args=args,
        files=files,
        stdin="",
        deadline=time.monotonic() + CEILING_SECONDS,
        limits=Limits(),
        label="binding",
    )
    try:
        outcome = await executor.execute(plan, cancel or CancelSignal())
    except EnvelopeFailure as failure:
        raise BindingError(
            f"its evaluation could not run: {envelope_error(failure).message}; nothing was "
            "admitted",
            pointer="",
            rule="binding-script",
            source=source,
        ) from failure
    run = Evaluation(
        stdout=outcome.stdout.data,
        stderr=outcome.stderr.data,
        truncated=outcome.stdout.truncated or outcome.stderr.truncated,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        stop_reason=outcome.stop_reason,
    )
    evaluated = read_evaluation(
        run,
        source=source,
        host_root=str(script.root),
        limit_s=CEILING_SECONDS,
        relative=script.relative,
    )
    if evaluated.jig is not None and script.jig_path is not None:
        check_listed(evaluated.jig, script.relative, source=source, jig_source=str(script.jig_path))
    return ScriptResult(evaluated=evaluated, digest=script.digest, root=script.root)


def load_any_binding(path: Path, cgroup_base: str | None = None) -> LoadedBinding:
    """A Binding of any form, a script evaluated in an envelope of its own (blocking).

    For the fronts without a service (`lock`, `doctor`). Raises `BindingError`, and
    `RuntimeUnavailable` when a script must be evaluated and no Bun is installed.
    """
    if not is_script(path):
        return load_binding(path)
    runtime = find_runtime()
    return load_binding(path, anyio.run(_evaluate_alone, path, runtime, cgroup_base))


async def _evaluate_alone(path: Path, runtime: BunBinary, cgroup_base: str | None) -> ScriptResult:
    # Imported here: only a script Binding needs the envelope (and its cgroups) at all.
    from jigcmd.envelope.cgroups import CgroupUnavailable  # noqa: PLC0415 - see above
    from jigcmd.envelope.delegation import DelegationError, resolve_backend  # noqa: PLC0415
    from jigcmd.envelope.native import NativeExecutor  # noqa: PLC0415 - see above

    try:
        _, base = await anyio.to_thread.run_sync(lambda: resolve_backend(cgroup_base))
    except (CgroupUnavailable, DelegationError, ValueError) as exc:
        raise BindingError(
            f"its evaluation needs an envelope, and cgroups are unavailable: {exc}; nothing "
            "was admitted",
            pointer="",
            rule="binding-script",
            source=str(path),
        ) from exc
    executor = NativeExecutor(cgroup_base=base)
    try:
        executor.stage_at_start(await anyio.to_thread.run_sync(lambda: runtime.binds))
        return await evaluate_script(path, executor, runtime)
    finally:
        with anyio.CancelScope(shield=True):
            await executor.aclose()
