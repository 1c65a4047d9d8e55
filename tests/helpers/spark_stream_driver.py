"""A Spark driver as its own process, for tests that SIGKILL a streaming query's driver.

    python -m tests.helpers.spark_stream_driver --namesrv H:P --topic T --checkpoint DIR
        [--option key=value ...] [--pause-first-batch MARKER]

A ``pumice`` stream from ``--topic`` into Spark's ``noop`` sink, every 200 ms, until killed (or
``PAUSE_S``). A test reads the checkpoint it leaves with a query of its own.

``--pause-first-batch MARKER`` reads through format ``pumice_paused``: the pumice source whose
driver-side ``latestOffset`` (the step after ``initialOffset``, before Spark writes the first
batch's offsets to the checkpoint) writes ``MARKER`` and waits there until its parent process
is gone (at most ``PAUSE_S``): the test sends messages and kills the driver at a known point.
The marker's path reaches the Spark-started Python worker through the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from tests.helpers.spark import spark_session

PAUSE_ENV = "PUMICE_TEST_PAUSE_MARKER"
PAUSE_S = 120.0
PAUSED_FORMAT = "pumice_paused"


def paused_source():
    """The pumice source with a pause in its first ``latestOffset`` (classes built here, so that
    the driver pickles them by value for Spark's Python workers)."""
    from pumice.spark.broker_stream import BrokerStreamReader
    from pumice.spark.data_source import PumiceDataSource

    class PausedStreamReader(BrokerStreamReader):
        def latestOffset(self, start, limit):
            Path(os.environ[PAUSE_ENV]).write_text(json.dumps(start))
            parent, deadline = os.getppid(), time.monotonic() + PAUSE_S
            while os.getppid() == parent and time.monotonic() < deadline:  # the JVM's death ends the wait
                time.sleep(0.1)
            raise RuntimeError("paused latestOffset: the test did not kill the driver")

    class PausedDataSource(PumiceDataSource):
        @classmethod
        def name(cls) -> str:
            return PAUSED_FORMAT

        def streamReader(self, schema):
            reader = super().streamReader(schema)
            return PausedStreamReader(reader.sopts)

    return PausedDataSource


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--option", action="append", default=[])
    p.add_argument("--pause-first-batch")
    args = p.parse_args()
    fmt = "pumice"
    if args.pause_first_batch:
        os.environ[PAUSE_ENV] = args.pause_first_batch  # before the JVM starts: its workers inherit it
        fmt = PAUSED_FORMAT
    with spark_session() as spark:
        if args.pause_first_batch:
            spark.dataSource.register(paused_source())
        reader = spark.readStream.format(fmt).option("namesrv", args.namesrv).option("topic", args.topic)
        for kv in args.option:
            key, _, value = kv.partition("=")
            reader = reader.option(key, value)
        query = (
            reader.load().writeStream.format("noop").option("checkpointLocation", args.checkpoint)
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        try:
            query.awaitTermination(PAUSE_S)
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
        finally:
            query.stop()


if __name__ == "__main__":
    main()
