"""StoreStatsService: the store's running totals and their rates, as RocketMQ's StoreStatsService.

The put and get paths add to plain counters (the GIL makes a lost update rare, and these are
statistics). Once a second this thread takes a sample of the totals and keeps the last 601
(ten minutes); a rate over a window is (newest − the sample ``window`` seconds older) / the
time between them. Until a window has filled, the oldest sample stands in (RocketMQ leaves
the figure blank then), so a young broker still reports a rate.

Runtime-info keys it gives (GET_BROKER_RUNTIME_INFO; values are strings, as upstream):

========================  ===================================================================
key                       value
========================  ===================================================================
putTps                    messages put per second over 10 s, 1 min and 10 min, ``"a b c"``
getFoundTps               pulls (getMessage calls) that found messages, per second, same form
getMissTps                pulls that found none
getTotalTps               all pulls
getTransferedTps          messages returned by pulls per second (RocketMQ's spelling)
putMessageTimesTotal      messages put since the store started (1 when none, as upstream)
putMessageSizeTotal       their bytes
putMessageAverageSize     size total / times total
putMessageFailedTimes     puts refused or failed since start
getMessageTransferedMsgCount  messages returned by pulls since start
========================  ===================================================================
"""

from __future__ import annotations

import collections
import threading
import time

from pumice.store.service_thread import ServiceThread

FREQUENCY_OF_SAMPLING_S = 1.0
MAX_RECORDS_OF_SAMPLING = 600  # ten minutes of one-second samples
WINDOWS_S = (10, 60, 600)

# fields of a sample after its time
_PUTS, _FOUND, _MISS, _TRANSFERRED = 1, 2, 3, 4


class StoreStatsService(ServiceThread):
    def __init__(self) -> None:
        super().__init__("StoreStatsService")
        self.put_message_times_total = 0
        self.put_message_size_total = 0
        self.put_message_failed_times = 0
        self.get_message_times_total_found = 0
        self.get_message_times_total_miss = 0
        self.get_message_transfered_msg_count = 0
        self._samples: collections.deque[tuple[float, int, int, int, int]] = collections.deque(
            maxlen=MAX_RECORDS_OF_SAMPLING + 1
        )
        self._lock = threading.Lock()
        self.sampling()

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(FREQUENCY_OF_SAMPLING_S)
            self.sampling()

    def sampling(self, now_s: float | None = None) -> None:
        sample = (
            time.monotonic() if now_s is None else now_s,
            self.put_message_times_total,
            self.get_message_times_total_found,
            self.get_message_times_total_miss,
            self.get_message_transfered_msg_count,
        )
        with self._lock:
            self._samples.append(sample)

    def tps(self, field: int, window_s: int) -> float:
        """Events per second of ``field`` over the last ``window_s`` seconds of samples."""
        with self._lock:
            if len(self._samples) < 2:
                return 0.0
            last = self._samples[-1]
            first = self._samples[max(0, len(self._samples) - 1 - window_s)]
        elapsed = last[0] - first[0]
        return (last[field] - first[field]) / elapsed if elapsed > 0 else 0.0

    def _tps_text(self, *fields: int) -> str:
        return " ".join(f"{sum(self.tps(f, w) for f in fields):.2f}" for w in WINDOWS_S)

    def put_tps(self, window_s: int = 60) -> float:
        return self.tps(_PUTS, window_s)

    def get_transfered_tps(self, window_s: int = 60) -> float:
        return self.tps(_TRANSFERRED, window_s)

    def runtime_info(self) -> dict[str, str]:
        times = self.put_message_times_total or 1
        return {
            "putTps": self._tps_text(_PUTS),
            "getFoundTps": self._tps_text(_FOUND),
            "getMissTps": self._tps_text(_MISS),
            "getTotalTps": self._tps_text(_FOUND, _MISS),
            "getTransferedTps": self._tps_text(_TRANSFERRED),
            "putMessageTimesTotal": str(times),
            "putMessageSizeTotal": str(self.put_message_size_total),
            "putMessageAverageSize": str(self.put_message_size_total / times),
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "getMessageTransferedMsgCount": str(self.get_message_transfered_msg_count),
        }
