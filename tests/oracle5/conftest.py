"""Fixtures of the RocketMQ 5 reference suite: Apache RocketMQ 5.3.3 (name server, and broker with
its proxy in LOCAL mode; tests/helpers/rocketmq5.py), and the official
Python v5 client (tests/helpers/v5_python.py).

``v5_server``'s RocketMQ 5.3.3 and ``rocketmq5`` are the worker's shared one (tests/conftest.py's
``rocketmq5_shared``): the modules here run on one worker (xdist group ``rocketmq5``) and use
topics and groups of their own.

``v5_server`` runs a module's tests once per server in ``V5_SERVERS``: the same scenario, the same
expectations, against RocketMQ 5.3.3 and Pumice."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import v5_python
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import RocketMQ5, V5Server, serve

# name -> how a module starts that server in a directory of its own (stopped by its stop()); None:
# the worker's shared RocketMQ 5.3.3 (tests/conftest.py's rocketmq5_shared, never stopped here).
# "pumice": a `pumice namesrv` and a `pumice broker --enable-proxy` process (tests/helpers/pumice5.py).
V5_SERVERS: dict[str, Callable[[Path], V5Server] | None] = {
    "rocketmq5": None,
    "pumice": PumiceV5,
}


@pytest.fixture
def rocketmq5(rocketmq5_shared: RocketMQ5) -> RocketMQ5:
    """The worker's shared RocketMQ 5.3.3 (SHARED_BROKER_CONF, SHARED_PROXY_CONF): a module's own
    would cost a boot (about 20 s on 2 cores) and a stop (about 10 s) for what it checks."""
    return rocketmq5_shared


@pytest.fixture(scope="module", params=sorted(V5_SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[V5Server]:
    """Each server of ``V5_SERVERS`` in turn, once per module."""
    yield from serve(request, tmp_path_factory, V5_SERVERS)


@pytest.fixture(scope="session")
def v5_client() -> Path:
    """The official Python v5 client's venv python (fails with the install command if missing)."""
    return v5_python.venv_python()
