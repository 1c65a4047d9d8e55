"""The machine's scheduling hiccups while a benchmark runs (as jHiccup measures a JVM's).

    python3 -m bench.hiccup          # samples until stdin closes, then prints one line

A process that asks to sleep 1 ms, over and over, and records by how much each wake-up came
late. On an idle, quiet machine the lateness is ~0.1 ms; when the host takes the virtual CPUs
away (other tenants, the hypervisor) it grows to milliseconds, and so does every latency a
benchmark measures meanwhile. Printed next to a latency figure, it says whether a bad tail
was the code or the machine. It costs ~1% of a core (a thousand short wake-ups a second).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time


def _sample() -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    late: list[float] = []
    clock = time.perf_counter
    while not stop.is_set():
        t0 = clock()
        time.sleep(0.001)
        late.append(clock() - t0 - 0.001)
    late.sort()
    if not late:
        print("hiccups: no samples", flush=True)
        return
    n = len(late)
    print(f"hiccups: {n:,} wake-ups, late p50 {late[n // 2] * 1e3:.2f} ms, p99 {late[int(n * 0.99)] * 1e3:.2f} ms, "
          f"p99.9 {late[int(n * 0.999)] * 1e3:.2f} ms, max {late[-1] * 1e3:.2f} ms", flush=True)  # fmt: skip


class HiccupMeter:
    """``with HiccupMeter() as m: ...`` then ``m.report``: the sampler's line for that span."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.report = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> HiccupMeter:
        if not self.enabled:
            return self
        self._proc = subprocess.Popen([sys.executable, "-m", "bench.hiccup"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)  # fmt: skip
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        try:
            out, _ = self._proc.communicate(timeout=10)
            self.report = out.strip()
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            self.report = "hiccups: the sampler did not answer"


if __name__ == "__main__":
    _sample()
