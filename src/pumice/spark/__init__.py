"""Pumice on Apache Spark (PySpark): the ``pumice`` data source and the Spark jobs.

    import pumice.spark
    pumice.spark.register(spark)
    df = spark.read.format("pumice").load("/data/store")
    df = spark.read.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()
    q = spark.readStream.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()
    df.write.format("pumice").mode("append").option("namesrv", "127.0.0.1:9876").option("topic", "T").save()
    q = df.writeStream.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "T").start()

=========================  ===================================================================
module                     concept
=========================  ===================================================================
``schema``                 the row schema (one row per message), Spark and Arrow forms
``options``                the data source's options, parsed and checked
``data_source``            ``PumiceDataSource``, registered as format ``pumice`` (read, stream, write)
``store_reader``           reading a store directory: input partitions and task reads
``broker_reader``          reading from brokers (``namesrv``): queue ranges planned on the driver,
                           pulled by the tasks
``broker_stream``          streaming from brokers (``spark.readStream``): offsets per queue,
                           admission control, Trigger.AvailableNow, new queues found
``initial_offsets``        a stream's initial offsets kept where ``initialOffsetsPath`` points
``broker_writer``          writing to brokers: rows → batches sent by each task
``broker_sink``            streaming to brokers (``df.writeStream``): deterministic UNIQ_KEYs,
                           exactly-once for readers that dedupe on them
``store_files``            a store directory seen read-only: segments, ConsumeQueue entries
``record_columns``         CommitLog records → Arrow columns, vectorised
``jobs``                   ``export``, ``stats``, ``reindex`` (also ``pumice spark …``)
``cli``                    the ``pumice spark`` command group
=========================  ===================================================================

pyspark and pyarrow come with the optional ``spark`` extra; importing this package does not
need them (``pumice --help`` works without), only using it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``pumice`` format with ``spark`` (once per session is enough; repeating is harmless)."""
    from pumice.spark.data_source import PumiceDataSource

    spark.dataSource.register(PumiceDataSource)
