#!/usr/bin/env bash
# The official RocketMQ 5 Node.js client (rocketmq-client-nodejs 1.0.8, gRPC) in a directory of
# its own, every package pinned by tests/peers5-node/package-lock.json (`npm ci`):
#   bash tests/peers5-node/install.sh
# Directory: $PUMICE_V5_NODE_DIR, else $HOME/.cache/pumice-peers/v5-node (its node_modules).
# Quick when already installed: the directory keeps the lock file it was made from and is
# rebuilt only when the lock changed. tests/helpers/v5_node.py runs
# tests/peers5-node/v5_node_driver.js with NODE_PATH=<dir>/node_modules.
# Needs node >= 16.19 (the client's engines) and npm: apt-get install nodejs npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${PUMICE_V5_NODE_DIR:-$HOME/.cache/pumice-peers/v5-node}"

if [ -d "$dir/node_modules/rocketmq-client-nodejs" ] && cmp -s "$here/package-lock.json" "$dir/package-lock.json"; then
    echo "v5 node client: $dir is up to date"
    exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
# no install scripts: the client and its dependencies need none (crc32's binary is a platform package)
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
# the client loads (its generated stubs, the native crc32) and says its version
NODE_PATH="$dir/node_modules" node -e '
require("rocketmq-client-nodejs");
console.log("v5 node client", require("rocketmq-client-nodejs/package.json").version);'
echo "v5 node client: installed in $dir"
