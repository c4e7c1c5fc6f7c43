"""The name of each signal a Linux process can die of (1-64), as evidence's `signal` gives it."""

from __future__ import annotations

__all__ = ["signal_name"]

# 1-31 as the kernel numbers them on x86-64 and arm64 (signal(7)), named as bash's `kill -l`
# prints them: SIGABRT not SIGIOT, SIGIO not SIGPOLL.
_STANDARD = (
    *("SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE"),
    *("SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM"),
    *("SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU"),
    *("SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO"),
    *("SIGPWR", "SIGSYS"),
)
# The real-time signals as bash's `kill -l` names them (bash's support/signames.c over
# glibc, signal(7)): glibc's SIGRTMIN is 34 and SIGRTMAX 64 (the kernel's _NSIG); the lower
# half counts up from SIGRTMIN (35 is SIGRTMIN+1 … 49 SIGRTMIN+15), the upper half down from
# SIGRTMAX (50 is SIGRTMAX-14 … 63 SIGRTMAX-1). Fixed here, not Python's `signal.SIGRTMIN`:
# the name must not change with the host's libc (musl's SIGRTMIN is 35).
_RTMIN, _RTMAX = 34, 64
_RT_HALF = _RTMIN + (_RTMAX - _RTMIN) // 2


def signal_name(number: int) -> str:
    """`SIGKILL` for 9, `SIGRTMIN+6` for 40; ValueError outside 1-64 (no signal kills there).

    32 and 33 are real-time signals to the kernel but reserved by glibc for its threads:
    glibc, bash and Python name neither (strace calls 32 the kernel's SIGRTMIN, which would
    clash with glibc's), so they are `SIG32` and `SIG33`, a name no convention gives otherwise.
    """
    if 1 <= number <= len(_STANDARD):
        return _STANDARD[number - 1]
    if number in (32, 33):
        return f"SIG{number}"
    if number == _RTMIN:
        return "SIGRTMIN"
    if _RTMIN < number <= _RT_HALF:
        return f"SIGRTMIN+{number - _RTMIN}"
    if _RT_HALF < number < _RTMAX:
        return f"SIGRTMAX-{_RTMAX - number}"
    if number == _RTMAX:
        return "SIGRTMAX"
    raise ValueError(f"{number} is no Linux signal number (1-64)")
