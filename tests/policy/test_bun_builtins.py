"""The built-in module names jigcmd keeps as data are the ones the Bun it runs serves."""

from __future__ import annotations

import json
import subprocess

from jigcmd.policy.bunbuiltins import BUILTIN_MODULES, is_builtin
from tests.required import require_runtime

_LIST = "console.log(JSON.stringify(require('module').builtinModules))"


def test_the_kept_list_is_the_bun_runtimes_own_bare_builtin_modules() -> None:
    """Bun's `builtinModules` without the `bun:`/`node:` entries: a Bun that adds or drops
    one makes the data stale, and this says which."""
    bun = require_runtime()
    listed = subprocess.run(
        [bun.path, "-e", _LIST], capture_output=True, text=True, timeout=60, check=True,
        env={"BUN_RUNTIME_TRANSPILER_CACHE_PATH": "0"},
    )  # fmt: skip
    bare = {name for name in json.loads(listed.stdout) if ":" not in name}
    assert bare == BUILTIN_MODULES, (sorted(bare - BUILTIN_MODULES), sorted(BUILTIN_MODULES - bare))


def test_a_subpath_is_a_builtin_only_as_listed() -> None:
    """`fs/promises` is Bun's; `buffer/` (the npm polyfill's idiom) and `events/x` are not."""
    assert is_builtin("events") and is_builtin("fs/promises")
    assert not is_builtin("buffer/") and not is_builtin("events/x") and not is_builtin("zod")
