"""RocketMQ 5.3.3's timer keys that Pumice does not build (docs/v5/timer.md): `pumice broker`
started with one of them away from its default exits at once naming the key; at its default (or
at the value that is what Pumice does) it starts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.ports import free_port

# key → a value 5.3.3 would act on and Pumice cannot
REFUSED = {
    "timerGetMessageThreadNum": "8",
    "timerPutMessageThreadNum": "1",
    "timerEnableCheckMetrics": "notabool",
    "timerCheckMetricsWhen": "03",
    "timerMetricSmallThreshold": "10",
    "timerProgressLogIntervalMs": "1000",
    "timerSkipUnknownError": "maybe",
}
# 5.3.3's defaults, and the values that say what Pumice does (retry until stored, skip what
# cannot be read, no hourly revision of timermetrics)
ACCEPTED = (
    "timerGetMessageThreadNum=3\ntimerPutMessageThreadNum=3\ntimerEnableCheckMetrics=true\n"
    "timerCheckMetricsWhen=05\ntimerMetricSmallThreshold=1000000\ntimerProgressLogIntervalMs=10000\n"
    "timerSkipUnknownError=true\ntimerEnableRetryUntilSuccess=true\n"
)


def broker(conf: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pumice.cli", "broker", *args, "-c", str(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_unbuilt_timer_keys_are_refused_at_start_by_name(tmp_path: Path) -> None:
    started: dict[str, subprocess.Popen[str]] = {}
    errors: dict[str, str] = {}
    try:
        for key, value in REFUSED.items():
            conf = tmp_path / f"{key}.conf"
            conf.write_text(f"listenPort={free_port()}\nstorePathRootDir={tmp_path / key}\n{key}={value}\n")
            started[key] = broker(conf)
        deadline = time.monotonic() + 120  # a refusal takes a second or two; a loaded CI, longer
        for key, p in started.items():
            try:
                errors[key] = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[1]
            except subprocess.TimeoutExpired:
                errors[key] = "still running after 120 s"
    finally:
        for p in started.values():  # a broker that started (the key accepted) is stopped
            if p.poll() is None:
                p.kill()
                p.wait(10)
    for key, p in started.items():
        assert p.returncode != 0 and f"{key}={REFUSED[key]} is not supported" in errors[key], (key, errors[key])
        assert "Traceback" not in errors[key]
    ok = tmp_path / "ok.conf"
    ok.write_text(f"listenPort=10999\nstorePathRootDir={tmp_path / 'ok'}\n{ACCEPTED}")
    p = broker(ok, "-p")  # -p: the parsed config, printed, and exit
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "timerPrecisionMs=1000" in out, err
