"""Fixtures of the tests that start `pumice` processes on 127.0.0.1 (their helpers:
tests/helpers/clusters.py)."""

from __future__ import annotations

from tests.helpers.clusters import running_cluster

# a running pair for each test that asks for ``cluster``
cluster = running_cluster("cluster", scope="function")
