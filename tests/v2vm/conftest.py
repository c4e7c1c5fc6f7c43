"""The cgroup v2 VM suite: the host side boots the VM, the `guest/` side runs inside it.

`scripts/v2vm.py` sets `JIGCMD_IN_V2VM=1` in the guest. There pytest collects only `guest/`
(never the host test that would boot a VM inside the VM); on the host it collects only the
host test, because `guest/` assumes a machine with nothing but cgroup v2.
"""

from __future__ import annotations

import os

IN_GUEST = os.environ.get("JIGCMD_IN_V2VM") == "1"

collect_ignore_glob = ["test_*.py"] if IN_GUEST else ["guest/*"]
