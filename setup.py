"""The package build: the Python package and, where ``cargo`` is on the PATH, the Rust crate in
``native/`` as the extension ``pumice._native``
(optional: without a toolchain, or if its build fails, Pumice installs and runs the pure-Python
twins; ``pumice broker`` says so at start-up)."""

import os
import shutil

from setuptools import setup

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

setup(rust_extensions=rust_extensions)
