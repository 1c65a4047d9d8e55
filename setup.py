"""The package build: plain Python, or with ``PUMICE_COMPILE=1`` the hot modules that
``pumice.compiled.COMPILED_MODULES`` names compiled by mypyc from the same source."""

import os
import runpy

from setuptools import setup

ext_modules = []
if os.environ.get("PUMICE_COMPILE") == "1":
    from mypyc.build import mypycify  # mypy==2.4.1 (the test extra); build with --no-build-isolation

    names = runpy.run_path(os.path.join("src", "pumice", "compiled.py"))["COMPILED_MODULES"]
    ext_modules = mypycify([os.path.join("src", *n.split(".")) + ".py" for n in names], opt_level="3")

setup(ext_modules=ext_modules)
