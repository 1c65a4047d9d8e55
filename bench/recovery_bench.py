"""Recovery benchmark: how fast the CommitLog is scanned after an unclean stop.

    python3 -m bench.recovery_bench [--gib 2] [--dir PATH]

A child process writes about ``--gib`` GiB of 1 KiB messages to a store (default 1 GiB files)
and exits without shutting down (the ``abort`` file stays, the checkpoint was never
flushed), so the next load scans every file from the first. The parent then times that
load and the raw scan, and prints CRC32 speed for comparison.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from zlib_ng.zlib_ng import crc32

from pumice.store import DefaultMessageStore, MessageStoreConfig
from pumice.store.message_check import scan_records

CHILD = r"""
import os, sys, time
from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig
root, gib = sys.argv[1], float(sys.argv[2])
store = DefaultMessageStore(MessageStoreConfig(store_path_root_dir=root))
store.load(); store.start()
body = os.urandom(1024)
host = (b"\x7f\x00\x00\x01", 10911)
i = 0
while store.get_max_phy_offset() < gib * (1 << 30):
    batch = [MessageExtBrokerInner(topic="RecoverTopic", body=body, queue_id=j % 8, store_host=host,
             properties={"KEYS": f"k{i + j}"}) for j in range(64)]
    assert store.put_messages(batch).is_ok()
    i += 64
deadline = time.monotonic() + 300
while store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
    time.sleep(0.05)
print(i, store.get_max_phy_offset(), flush=True)
os._exit(0)  # an unclean stop: no shutdown, the abort file stays
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="pumice-recover-", dir=os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, root, str(args.gib)], check=True, capture_output=True,
                             text=True).stdout.split()  # fmt: skip
        messages, size = int(out[0]), int(out[1])
        assert os.path.exists(os.path.join(root, "abort"))
        print(f"wrote {messages:,} messages, {size / 1e9:.2f} GB of CommitLog, then stopped uncleanly")

        config = MessageStoreConfig(store_path_root_dir=root)
        files = sorted(os.listdir(config.commit_log_dir))
        t0 = time.perf_counter()
        store = DefaultMessageStore(config)
        assert store.load()
        t_load = time.perf_counter() - t0
        assert not store.last_exit_ok
        assert store.get_max_phy_offset() == size, (store.get_max_phy_offset(), size)
        print(f"load + abnormal recovery (CRC on): {t_load:.2f} s = {size / t_load / 1e9:.2f} GB/s of CommitLog")
        mfq = store.commit_log.mapped_file_queue
        for check_crc in (False, True):
            t0 = time.perf_counter()
            scanned = 0
            for mf in mfq.mapped_files:
                end, _, _ = scan_records(mf.mmap, 0, mf.file_size, check_crc)
                scanned += end
            t = time.perf_counter() - t0
            print(f"scan_records, CRC {'on ' if check_crc else 'off'}: {scanned / t / 1e9:.2f} GB/s")
        store.shutdown()
        print(f"({len(files)} CommitLog files)")

        body = os.urandom(1 << 30)
        t0 = time.perf_counter()
        crc32(body)
        big = (1 << 30) / (time.perf_counter() - t0) / 1e9
        mv = memoryview(body)[: 64 << 20]
        t0 = time.perf_counter()
        for i in range(0, len(mv), 1024):
            crc32(mv[i : i + 1024])
        small = len(mv) / (time.perf_counter() - t0) / 1e9
        print(f"CRC32 (zlib-ng): {big:.2f} GB/s on 1 GiB, {small:.2f} GB/s on 1 KiB bodies")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
