"""The modules pumice.compiled names run compiled exactly when the build compiled them.

.ci/run runs this suite twice: on the editable install (plain Python: none compiled) and on a
``PUMICE_COMPILE=1`` build put first on PYTHONPATH with ``PUMICE_EXPECT_COMPILED=1`` (all of
them compiled). A stale extension next to a source file, or a build that compiled nothing,
fails here."""

from __future__ import annotations

import os

from pumice.compiled import COMPILED_MODULES, compiled_modules


def test_the_hot_modules_are_compiled_exactly_when_expected() -> None:
    expected = list(COMPILED_MODULES) if os.environ.get("PUMICE_EXPECT_COMPILED") == "1" else []
    assert compiled_modules() == expected
