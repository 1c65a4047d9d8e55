"""The package build: plain Python, or with ``PUMICE_COMPILE=1`` the hot modules that
``pumice.compiled.COMPILED_MODULES`` names compiled by mypyc from the same source; and, where
``cargo`` is on the PATH, the Rust crate in ``native/`` as the extension ``pumice._native``
(optional: without a toolchain, or if its build fails, Pumice installs and runs the pure-Python
twins; ``pumice broker`` says so at start-up)."""

import os
import runpy
import shutil

from setuptools import setup

ext_modules = []
if os.environ.get("PUMICE_COMPILE") == "1":
    from mypyc.build import mypycify  # mypy==2.4.1 (the test extra); build with --no-build-isolation

    names = runpy.run_path(os.path.join("src", "pumice", "compiled.py"))["COMPILED_MODULES"]
    ext_modules = mypycify([os.path.join("src", *n.split(".")) + ".py" for n in names], opt_level="3")

rust_extensions = []
if shutil.which("cargo"):
    from setuptools_rust import Binding, RustExtension  # setuptools-rust==1.12.0 (pyproject's build requires)

    rust_extensions = [
        RustExtension(
            "pumice._native",
            path=os.path.join("native", "Cargo.toml"),
            binding=Binding.PyO3,
            features=["extension-module"],
            optional=True,
            # release always: an editable install (in place) would otherwise build debug, ~5x slower
            debug=False,
            # Cargo.lock pins every crate; a build never updates it
            args=["--locked"],
        )
    ]

setup(ext_modules=ext_modules, rust_extensions=rust_extensions)
