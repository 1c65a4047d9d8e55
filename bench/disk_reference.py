"""The machine's reference figures: sequential write throughput and fdatasync latency.

    python3 -m bench.disk_reference [--dir PATH] [--mib 1024]

Writes a file with 1 MiB writes and one fdatasync at the end (throughput), then appends
4 KiB and calls fdatasync 500 times (latency). The file is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--mib", type=int, default=1024)
    args = ap.parse_args()
    fd, path = tempfile.mkstemp(prefix="pumice-disk-", dir=args.dir)
    try:
        chunk = os.urandom(1 << 20)
        t0 = time.perf_counter()
        for _ in range(args.mib):
            os.write(fd, chunk)
        os.fdatasync(fd)
        t = time.perf_counter() - t0
        print(f"sequential write   {args.mib} MiB in {t:.2f} s = {args.mib * 1.048576 / t:,.0f} MB/s (incl. fdatasync)")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        page = os.urandom(4096)
        lat = []
        for _ in range(500):
            os.write(fd, page)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t0) * 1e6)
        lat.sort()
        print(
            f"fdatasync 4 KiB    median {statistics.median(lat):,.0f} us, p99 {lat[int(len(lat) * 0.99)]:,.0f} us, "
            f"max {lat[-1]:,.0f} us"
        )
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    main()
