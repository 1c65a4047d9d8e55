"""The oracle suite's share of .ci/run's time budget: the variants marked ``ALL_ONLY`` run only
with ``PUMICE_ORACLE_ALL=1`` (each marked test says what still covers its ground by default)."""

from __future__ import annotations

import os

import pytest

ALL_ONLY = pytest.mark.skipif(not os.environ.get("PUMICE_ORACLE_ALL"), reason="PUMICE_ORACLE_ALL=1 runs it")
