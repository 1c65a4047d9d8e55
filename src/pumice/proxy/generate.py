"""Generates the Python stubs of RocketMQ 5's gRPC protocol from ``proxy/proto/*.proto``.

The package build runs it (setup.py's ``build_py``, also for ``pip install -e .``); in a work
tree, ``python3 -m pumice.proxy.generate`` writes them beside the ``.proto`` files (git-ignored):

| file                      | what                                           |
|---------------------------|------------------------------------------------|
| ``domain_pb2.py``/``.pyi``    | the shared types (Resource, Message, Settings, Code) |
| ``messaging_pb2.py``/``.pyi`` | the requests and answers                        |
| ``messaging_pb2_grpc.py``     | ``MessagingService``'s servicer and stub        |

It needs grpcio-tools (a build requirement, pinned in pyproject.toml); it imports nothing of
Pumice, so setup.py can load it by path before the package is installed.
"""

from __future__ import annotations

import glob
import os
import sys

PROTO_FILES = ("domain.proto", "messaging.proto")


def proto_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")


def generate(quiet: bool = False) -> list[str]:
    """Runs protoc (grpc_tools) over the .proto files; returns the files written."""
    import grpc_tools
    from grpc_tools import protoc

    here = proto_dir()
    src_root = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # the directory holding pumice/
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")  # google/protobuf/*.proto
    args = [
        "grpc_tools.protoc", f"-I{src_root}", f"-I{well_known}",
        f"--python_out={src_root}", f"--pyi_out={src_root}", f"--grpc_python_out={src_root}",
    ] + [os.path.join(here, name) for name in PROTO_FILES]  # fmt: skip
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {', '.join(PROTO_FILES)} in {here}")
    written = sorted(glob.glob(os.path.join(here, "*_pb2*.py*")))
    if not quiet:
        for path in written:
            print(f"wrote {path}")
    return written


if __name__ == "__main__":
    try:
        generate()
    except ImportError:
        sys.exit("grpcio-tools is not installed: python3 -m pip install grpcio-tools (see pyproject.toml's pin)")
