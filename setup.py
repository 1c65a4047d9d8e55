"""The package build: the Python package and, where ``cargo`` is on the PATH, the Rust crate in
``native/`` as the extension ``pumice._native``
(optional: without a toolchain, or if its build fails, Pumice installs and runs the pure-Python
twins; ``pumice broker`` says so at start-up); and the gRPC stubs of ``pumice.proxy`` from its
``.proto`` files (``python3 -m pumice.proxy.generate`` does the same in a work tree)."""

import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithStubs(build_py):
    """Generates the gRPC stubs of pumice.proxy (RocketMQ 5's protocol) into the source tree
    first, so that wheels and editable installs both have them (grpcio-tools: a build requirement)."""

    def run(self) -> None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "pumice", "proxy", "generate.py")
        spec = importlib.util.spec_from_file_location("pumice_proxy_generate", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.generate(quiet=True)
        super().run()


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

setup(rust_extensions=rust_extensions, cmdclass={"build_py": BuildPyWithStubs})
