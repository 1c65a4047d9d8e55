#!/usr/bin/env bash
# The official RocketMQ 5 Python client (rocketmq-python-client 5.1.2, gRPC) in a venv of its own,
# away from Pumice's pins (its grpcio, protobuf and opentelemetry versions are its own):
#   bash tests/peers5/install.sh
# Venv: $PUMICE_V5_PYTHON_VENV, else $HOME/.cache/pumice-peers/v5-python. Every package is pinned
# in tests/peers5/v5-python-requirements.txt and installed with --no-deps, so the venv holds
# exactly that list. Quick when already installed: the venv keeps a copy of the list it was made
# from and is rebuilt only when the list changed. tests/helpers/v5_python.py runs
# tests/peers5/v5_python_driver.py with the venv's python. The venv is installed from the list's
# wheels, kept in $venv-wheels (with a copy of the list once complete): the README test's
# `pip install rocketmq-python-client==5.1.2` installs from them too instead of downloading them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${PUMICE_V5_PYTHON_VENV:-$HOME/.cache/pumice-peers/v5-python}"
req="$here/v5-python-requirements.txt"
stamp="$venv/pumice-requirements.txt"
wheels="$venv-wheels"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if ! cmp -s "$req" "$wheels/pumice-requirements.txt"; then
    rm -rf "$wheels"
    python3 -m pip download --quiet --no-deps --only-binary=:all: -r "$req" -d "$wheels"
    cp "$req" "$wheels/pumice-requirements.txt"
    echo "v5 python client: wheels in $wheels"
fi
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then
    echo "v5 python client: $venv is up to date"
    exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-deps --no-index --find-links "$wheels" -r "$req"
# the client imports (its generated stubs against the pinned protobuf) and says its version
"$venv/bin/python" -c 'import rocketmq, importlib.metadata as m; print("v5 python client", m.version("rocketmq-python-client"))'
cp "$req" "$stamp"
echo "v5 python client: installed in $venv"
