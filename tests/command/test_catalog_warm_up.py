"""The deferred runtime check of a Catalog never undoes a re-admission made while it ran.

`serve` hashes the Bun binary in a worker thread at start (its warm-up) while the Binding
watch may re-admit meanwhile: a drift read then must stand once the hash is done (until
round 31 the warm-up's result replaced it, admitting the drifted Binding again).
"""

from __future__ import annotations

import threading

import anyio
import pytest

from jigcmd.command.catalog import Catalog
from jigcmd.errors import Code, JigError
from jigcmd.policy.lock import ADMITTED, Admission

_DRIFTED = Admission(admitted=False, drift="policy", reason="Binding changed since admission")


def test_a_drift_read_while_the_runtime_is_hashed_stands() -> None:
    hashing, readmitted = threading.Event(), threading.Event()

    def runtime_check() -> Admission:
        hashing.set()
        readmitted.wait(30)
        return ADMITTED

    catalog = Catalog({}, ADMITTED, runtime_check)
    warming = threading.Thread(target=catalog.warm_up)
    warming.start()
    assert hashing.wait(30)
    catalog.readmit({}, _DRIFTED, None)
    readmitted.set()
    warming.join(30)

    async def check() -> None:
        await catalog.check_admission("cli")

    with pytest.raises(JigError) as refused:
        anyio.run(check)
    assert refused.value.code == Code.UNAVAILABLE
    assert "Binding changed since admission" in refused.value.message
