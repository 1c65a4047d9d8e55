"""BrokerController's own schedule, on a controller that is not started."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_controller import BrokerController
from tests.conftest import small_config


def test_a_periodic_job_that_fails_is_logged_and_runs_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The offset persist, consumer scan and stats jobs: one failure (e.g. an entry orjson
    cannot write) used to end the task for good, silently."""
    controller = BrokerController(BrokerConfig(listen_host="127.0.0.1", listen_port=10911), small_config(str(tmp_path)))
    runs: list[int] = []

    def job() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise TypeError("Dict integer key must be within 64-bit range")

    async def main() -> None:
        for in_thread in (False, True):
            runs.clear()
            task = asyncio.create_task(controller._periodic("persist consumer offsets", 0.01, job, in_thread))
            for _ in range(200):
                if len(runs) >= 3:
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            assert len(runs) >= 3

    asyncio.run(main())
    assert "persist consumer offsets failed" in caplog.text and "64-bit range" in caplog.text
