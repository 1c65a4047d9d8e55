"""Run the official RocketMQ 5 Node.js client (rocketmq-client-nodejs 1.0.8, gRPC;
tests/peers5-node/v5_node_driver.js with the node_modules of tests/peers5-node/install.sh) against
a gRPC endpoint, bounded by a timeout.

``run("produce", endpoint, "--topic", "T", "--count", "5", home=tmp)`` runs the driver to its end
and returns a ``V5Run`` (tests/helpers/v5_python.py: the driver's subcommands, options and events
are the Python driver's); ``V5Run.ok()`` asserts a clean end. It fails (never skips) with the
install command when node or the client is missing.

The client's directory: ``$PUMICE_V5_NODE_DIR``, else ``~/.cache/pumice-peers/v5-node``. The
driver's HOME is the test's directory (``home``): the client logs to ``~/logs/rocketmq``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.helpers.v5_python import V5Run, _parse

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "peers5-node" / "v5_node_driver.js"
INSTALL = "bash tests/peers5-node/install.sh"
CLIENT_VERSION = "1.0.8"
DEFAULT_TIMEOUT_S = 90.0


def client_dir() -> Path:
    return Path(os.environ.get("PUMICE_V5_NODE_DIR") or Path.home() / ".cache" / "pumice-peers" / "v5-node")


def node_modules() -> Path:
    """The client's node_modules; an AssertionError with the install command when it is missing."""
    if shutil.which("node") is None:
        raise AssertionError("node is not installed: .ci/run installs nodejs and npm (apt) for the Node v5 client")
    modules = client_dir() / "node_modules"
    if not (modules / "rocketmq-client-nodejs").is_dir():
        raise AssertionError(
            f"the RocketMQ 5 Node.js client (rocketmq-client-nodejs {CLIENT_VERSION}) is not installed in "
            f"{client_dir()}: run `{INSTALL}` (.ci/run does)"
        )
    return modules


def run(subcommand: str, endpoint: str, *args: str, home: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> V5Run:
    """Run the driver to its end (killed past ``timeout_s``: an AssertionError)."""
    # the driver's own watchdog ends it a little before ours kills it
    argv = [subcommand, "--endpoint", endpoint, "--timeout-s", str(max(1.0, timeout_s - 5)), *args]
    home.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"HOME": str(home), "NODE_PATH": str(node_modules())}
    try:
        p = subprocess.run(["node", str(DRIVER), *argv], capture_output=True, text=True, timeout=timeout_s, env=env,
                           cwd=home, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"killed after {timeout_s}s\n{_parse(argv, -9, out, err).describe()}") from None
    return _parse(argv, p.returncode, p.stdout, p.stderr)
