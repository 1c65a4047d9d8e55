"""TransientStorePool: off-map write buffers for the CommitLog (``transientStorePoolEnable``).

``transientStorePoolSize`` buffers (5 by default), each the size of a CommitLog file. A new
CommitLog file borrows one; appends go into it, CommitRealTimeService copies what is new
into the file, and the buffer comes back when the whole file is committed. RocketMQ
``mlock``s direct buffers; here they are anonymous maps, allocated lazily by the kernel
(not locked: an unprivileged process may lock only a little memory). With every buffer
borrowed, new files are written directly.

A returned buffer gives its pages back to the kernel (``MADV_REMOVE``: the maps are shared,
so ``MADV_DONTNEED`` would only unmap them), so only the buffers of files not yet wholly
committed are resident, usually one or two, not ``transientStorePoolSize`` files' worth
(RocketMQ keeps all of them locked). The next use faults in zeroed pages.
"""

from __future__ import annotations

import collections
import logging
import mmap
import threading

log = logging.getLogger(__name__)


class TransientStorePool:
    def __init__(self, pool_size: int, file_size: int) -> None:
        self.pool_size = pool_size
        self.file_size = file_size
        self._available: collections.deque[mmap.mmap] = collections.deque()
        self._lock = threading.Lock()

    def init(self) -> None:
        for _ in range(self.pool_size):
            self._available.append(mmap.mmap(-1, self.file_size))

    def borrow_buffer(self) -> mmap.mmap | None:
        with self._lock:
            buf = self._available.popleft() if self._available else None
        if buf is None:
            log.warning("TransientStorePool is empty: the new file is written directly")
        return buf

    def return_buffer(self, buf: mmap.mmap) -> None:
        try:
            buf.madvise(mmap.MADV_REMOVE)
        except (OSError, AttributeError) as e:  # not Linux: the pages stay until reused
            log.debug("transient store pool buffer kept resident: %s", e)
        with self._lock:
            self._available.append(buf)

    def available_buffer_nums(self) -> int:
        return len(self._available)

    def destroy(self) -> None:
        with self._lock:
            while self._available:
                self._available.popleft().close()
