"""AllocateMappedFileService: creates the next segment files off the put path.

When the CommitLog asks for file N it also queues file N+1, so the roll-over after N finds
N+1 already created, pre-allocated (``fallocate``) and mapped. With ``prefault``, each file
is also faulted in (``MADV_POPULATE_READ``) right after it is handed out or made ahead,
so appends do not pay a page fault per 4 KiB. Requests are served by one daemon thread in
order; a caller waiting for a file that is still being made waits on its future.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from pumice.store.mapped_file import MappedFile
from pumice.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    def __init__(
        self,
        *,
        preallocate: bool = True,
        prefault: bool = False,
        wait_timeout_s: float = 5.0,
        transient_store_pool: TransientStorePool | None = None,
        space_ok: Callable[[], bool] = lambda: True,
    ) -> None:
        self.space_ok = space_ok
        self._preallocate = preallocate
        self._pool = transient_store_pool
        self._prefault = prefault
        self._wait_timeout_s = wait_timeout_s
        self._requests: dict[str, Future[MappedFile]] = {}
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._stopped = False
        # the store's disk check: no file is made ahead on a disk past its warning level
        self._thread = threading.Thread(target=self._run, name="AllocateMappedFileService", daemon=True)
        self._thread.start()

    def _submit(self, path: str, size: int) -> Future[MappedFile]:
        with self._lock:
            fut = self._requests.get(path)
            if fut is None:
                fut = Future()
                self._requests[path] = fut
                self._queue.put((path, size))
            return fut

    def put_request_and_return_mapped_file(self, next_path: str, next_next_path: str, size: int) -> MappedFile | None:
        """Return the file at ``next_path`` and start making ``next_next_path``; None when
        stopped or timed out, the OSError when the file could not be made (a full disk, no
        descriptor left). The file ahead is made only while ``space_ok()`` says there is room."""
        if self._stopped:
            return None
        fut = self._submit(next_path, size)
        if self.space_ok():
            self._submit(next_next_path, size)
        try:
            mf = fut.result(timeout=self._wait_timeout_s)
        except TimeoutError:  # an OSError too: not the file's own failure
            log.error("create mapped file %s took over %.1f s", next_path, self._wait_timeout_s)
            mf = None
        except OSError:
            with self._lock:
                self._requests.pop(next_path, None)
            raise
        except Exception:
            log.exception("create mapped file %s failed", next_path)
            mf = None
        with self._lock:
            self._requests.pop(next_path, None)
            # made just as the wait ended (the result is set under this lock): take it, or it leaks
            if mf is None and fut.done() and not fut.cancelled() and fut.exception() is None:
                mf = fut.result()
        return mf

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            path, size = item
            with self._lock:
                fut = self._requests.get(path)
            if fut is None or fut.done():
                continue
            try:
                mf = MappedFile(path, size, preallocate=self._preallocate, transient_store_pool=self._pool)
            except BaseException as e:  # reported to the waiter
                fut.set_exception(e)
                continue
            with self._lock:
                wanted = self._requests.get(path) is fut
                if wanted:
                    fut.set_result(mf)
            if not wanted:  # its waiter gave up (timed out) and nobody will take it
                log.warning("mapped file %s was made after its waiter gave up: removed", path)
                mf.destroy(0)
                continue
            if self._prefault:
                mf.prefault(lambda: self._stopped)

    def shutdown(self) -> None:
        """Stop the thread and delete files made ahead that nobody took."""
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout=10)
        with self._lock:
            pending = list(self._requests.items())
            self._requests.clear()
        for path, fut in pending:
            if fut.done() and fut.exception() is None:
                mf = fut.result()
                mf.destroy(0)
                log.info("delete pre-allocated file %s", path)
            elif not fut.done():
                fut.cancel()
                if os.path.exists(path):
                    os.unlink(path)
