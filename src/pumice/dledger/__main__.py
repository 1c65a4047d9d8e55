"""A standalone DLedger node, as DLedger's own ``DLedger`` server runs one: for tests and
operators (``python -m pumice.dledger --group g --id n0 --peers 'n0-127.0.0.1:40911;…'
--store-dir /data``). It serves the peers' protocol and clients' APPEND/GET/METADATA on its
``--peers`` port until SIGTERM or SIGINT, then stops gracefully (pending appends are answered
TERM_CHANGED, the store flushed).

Exit codes: 0 after a signal, 2 for bad arguments or a store that cannot be opened, 1 for a
port that cannot be bound.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_response_code import DLedgerError

log = logging.getLogger("pumice.dledger")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pumice.dledger", description="Run one DLedger node.")
    p.add_argument("--group", required=True, help="the group name (dLegerGroup)")
    p.add_argument("--id", required=True, help="this node's id (dLegerSelfId), e.g. n0")
    p.add_argument("--peers", required=True, help="dLegerPeers: n0-host:port;n1-host:port;…")
    p.add_argument("--store-dir", required=True, help="storeBaseDir: files go under <dir>/dledger-<id>/")
    p.add_argument("--preferred-leader", default=None, help="preferredLeaderId (ids separated by ;)")
    p.add_argument("--store-type", choices=("file", "memory"), default="file", help="DLedger's storeType")
    p.add_argument("--enable-batch-push", action="store_true", help="enableBatchPush")
    p.add_argument(
        "--data-file-size",
        type=int,
        default=None,
        help="bytes per data file (the broker's mappedFileSizeCommitLog; DLedger's 1 GiB by default)",
    )
    p.add_argument("--log-level", default="INFO")
    return p


def _open_store(config: DLedgerConfig, store_type: str, current_term: Callable[[], int]) -> Any:
    if store_type == "memory":
        from pumice.dledger.dledger_memory_store import DLedgerMemoryStore

        return DLedgerMemoryStore()
    from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore

    store = DLedgerMmapFileStore(config, current_term)
    store.load_and_recover()
    store.start()
    return store


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        stream=sys.stderr)  # fmt: skip
    config = DLedgerConfig(group=args.group, self_id=args.id, peers=args.peers, store_base_dir=args.store_dir,
                           preferred_leader_id=args.preferred_leader,
                           enable_batch_push=args.enable_batch_push)  # fmt: skip
    if args.data_file_size is not None:
        if args.data_file_size < 4096:
            print("pumice.dledger: --data-file-size must be at least 4096", file=sys.stderr)
            return 2
        config.mapped_file_size_for_entry_data = args.data_file_size
    servers: list[Any] = []  # the store asks the member state's term (DLedger skips older commits)
    try:
        config.peer_map()
        store = _open_store(config, args.store_type, lambda: servers[0].term if servers else -1)
    except (ValueError, DLedgerError, OSError) as e:
        print(f"pumice.dledger: {e}", file=sys.stderr)
        return 2
    from pumice.dledger.dledger_server import DLedgerServer

    server = DLedgerServer(config, store)
    servers.append(server)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        server.start()
    except OSError as e:
        print(f"pumice.dledger: cannot listen on {config.self_address}: {e}", file=sys.stderr)
        store.shutdown()
        return 1
    print(f"pumice.dledger: {args.id} of {args.group} listening on {server.rpc.port}", flush=True)
    while not stop.wait(1.0):
        pass
    log.info("[%s] stopping", args.id)
    server.shutdown()
    store.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
