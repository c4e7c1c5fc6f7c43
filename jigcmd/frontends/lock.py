"""`jigcmd lock`: print the human review of a Binding and write its admitted lock."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from jigcmd.command.assembly import default_lock_path, lock_runtime, locked_file
from jigcmd.command.runtime import RuntimeUnavailable, find_runtime
from jigcmd.command.scriptbinding import load_any_binding
from jigcmd.policy.binding import BindingError
from jigcmd.policy.lock import (
    LockError,
    build_lock,
    check_admission,
    decode_lock,
    encode_lock,
    review_text,
)

__all__ = ["lock"]


def lock(
    binding_path: Path, lock_path: Path | None, *, check: bool, cgroup_base: str | None = None
) -> int:
    """Review and admit (or, with `check`, only verify); 0 admitted, 1 not admitted, 2 invalid.

    `cgroup_base`: where the envelope that evaluates a TypeScript Binding goes, as serve's
    `--cgroup-base` (None: `$JIGCMD_CGROUP_BASE`, else the default).
    """
    refused = _base_refused(cgroup_base)
    if refused is not None:
        sys.stderr.write(f"jigcmd lock: {refused}; nothing was admitted\n")
        return 2
    try:
        loaded = load_any_binding(binding_path, cgroup_base)
        runtime = lock_runtime(find_runtime())
    except (BindingError, RuntimeUnavailable) as exc:
        sys.stderr.write(f"jigcmd lock: {exc}\n")
        return 2
    target = lock_path or default_lock_path(binding_path)
    file = locked_file(loaded, target)
    if check:
        try:
            existing = decode_lock(target.read_bytes(), source=str(target))
        except FileNotFoundError:
            existing = None
        except (OSError, LockError) as exc:
            sys.stderr.write(
                f"jigcmd lock: {exc}; run `jigcmd lock --binding {binding_path}` to re-admit\n"
            )
            return 1
        admission = check_admission(
            loaded.binding,
            existing,
            runtime,
            lock_path=str(target),
            binding_path=str(binding_path),
            file=file,
            script=loaded.script,
        )
        print("admitted" if admission.admitted else f"not admitted: {admission.reason}")
        return 0 if admission.admitted else 1
    review = review_text(loaded.binding, runtime, slots=loaded.slots, file=file)
    data = encode_lock(build_lock(loaded.binding, runtime, file))
    try:
        _replace(target, data)
    except OSError as exc:
        sys.stderr.write(
            f"jigcmd lock: the lock {os.path.abspath(target)} cannot be written: "
            f"{exc.strerror}; nothing was admitted\n"
        )
        return 2
    # Printed once written: whether the review's reader stays (`| head`) decides nothing.
    print(review)
    print(f"\nadmitted: wrote {os.path.abspath(target)}")
    return 0


def _base_refused(cgroup_base: str | None) -> str | None:
    """Why serve would refuse this base, or None: refused here too, whatever the Binding's
    form, so the option is never taken and then ignored."""
    if cgroup_base is None:
        return None
    # Imported here: only a base given needs the envelope's rules (Linux only).
    from jigcmd.envelope.delegation import DelegationError, refuse_bad_base  # noqa: PLC0415 - see above

    try:
        refuse_bad_base(cgroup_base)
    except DelegationError as exc:
        return str(exc)
    return None


def _replace(target: Path, data: bytes) -> None:
    """Write `data` to `target` at once: a server reading the lock never sees half of one."""
    temporary = target.with_name(target.name + ".tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
