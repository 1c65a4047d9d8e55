"""pumice.common.logging_config: where each logger's records go, and a queue that never blocks."""

from __future__ import annotations

import logging
import queue

import pytest

from pumice.common import logging_config
from pumice.common.logging_config import LogConfigError, _DroppingQueueHandler, configure, route


@pytest.mark.parametrize(
    ("name", "main", "file"),
    [
        ("pumice.store.ha_connection", "broker.log", "ha.log"),
        ("pumice.store.group_transfer_service", "broker.log", "ha.log"),
        ("pumice.store.commit_log", "broker.log", "store.log"),
        ("pumice.remoting.remoting_server", "broker.log", "remoting.log"),
        ("pumice.namesrv.route_info_manager", "broker.log", "namesrv.log"),
        ("pumice.broker.broker_controller", "broker.log", "broker.log"),
        ("pumice.acl.plain_permission_manager", "broker.log", "broker.log"),
        ("pumice.common.file_watch", "namesrv.log", "namesrv.log"),
    ],
)
def test_route(name: str, main: str, file: str) -> None:
    assert route(name, main) == file


def test_a_full_queue_drops_and_then_says_how_many(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging_config, "QUEUE_MAX", 4)
    q: queue.Queue[logging.LogRecord] = queue.Queue(4)
    h = _DroppingQueueHandler(q)
    rec = logging.LogRecord("pumice.x", logging.INFO, __file__, 1, "m %d", (1,), None)
    for _ in range(10):
        h.handle(rec)  # never blocks, never raises
    assert q.qsize() == 4 and h.dropped == 6
    while not q.empty():
        q.get_nowait()
    h.handle(rec)
    got = [q.get_nowait().getMessage() for _ in range(q.qsize())]
    assert got == ["m 1", "6 log records dropped: the log writer fell behind"] and h.dropped == 0


def test_a_log_dir_that_cannot_be_written_is_one_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        with pytest.raises(LogConfigError, match=r"cannot write logs to .*choose another with --log-dir"):
            configure("broker.log", log_dir=str(blocker / "logs"))
    finally:  # the other tests' logging as it was
        for h in root.handlers[:]:
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
