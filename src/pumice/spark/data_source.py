"""``PumiceDataSource``: the ``pumice`` format for ``spark.read``, on PySpark's Python Data Source API.

    spark.read.format("pumice").load("/data/store")                       # every message
    spark.read.format("pumice").option("topic", "TopicA").load("/data/store")
    spark.read.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA").load()
    spark.readStream.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA").load()
    df.write.format("pumice").mode("append").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA").save()
    df.writeStream.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA").start()

The schema is fixed (``pumice.spark.schema``); the options are in ``pumice.spark.options``.
A store directory is read with no broker in between (``pumice.spark.store_reader``); with
option ``namesrv`` the read pulls from the brokers (``pumice.spark.broker_reader``) and a
write sends to them (``pumice.spark.broker_writer``). ``spark.readStream`` with ``namesrv``
streams from the brokers (``pumice.spark.broker_stream``); ``df.writeStream`` with ``namesrv``
streams to them (``pumice.spark.broker_sink``).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pumice.spark.options import (
    BrokerReadOptions,
    OptionError,
    ReadOptions,
    StreamReadOptions,
    WriteOptions,
    parse_bool,
)
from pumice.spark.schema import spark_schema

FORMAT = "pumice"


class PumiceDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _from_brokers(self) -> bool:
        return bool(self.options.get("namesrv"))

    def schema(self) -> StructType:
        return spark_schema(self._from_brokers() and not parse_bool(self.options, "includeProperties", True))

    def reader(self, schema: StructType) -> DataSourceReader:
        if schema != self.schema():
            raise ValueError(f"the {FORMAT} source has a fixed schema; read without .schema(...)")
        if self._from_brokers():
            from pumice.spark.broker_reader import BrokerReader

            return BrokerReader(BrokerReadOptions.parse(self.options))
        # imported here: every Python process Spark starts for this source imports this module, and
        # the store reader's imports (the store, numpy, pyarrow.compute) cost ~0.6 s each
        from pumice.spark.store_reader import StoreDirectoryReader

        return StoreDirectoryReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if schema != self.schema():
            raise ValueError(f"the {FORMAT} source has a fixed schema; read without .schema(...)")
        if not self._from_brokers():
            raise OptionError(f"a streaming {FORMAT} read needs option namesrv (it reads from brokers)")
        from pumice.spark.broker_stream import BrokerStreamReader

        return BrokerStreamReader(StreamReadOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError(f"the {FORMAT} sink appends to topics: use mode append, not overwrite")
        from pumice.spark.broker_writer import BrokerWriter

        return BrokerWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise OptionError(f"the {FORMAT} sink appends to topics: use output mode append")
        from pumice.spark.broker_sink import BrokerStreamWriter

        checkpoint = str(self.options.get("checkpointLocation") or "").strip() or None
        return BrokerStreamWriter(WriteOptions.parse(self.options), schema, checkpoint)


def read_store(
    spark,
    path: str,
    *,
    topics: tuple[str, ...] | list[str] = (),
    broker_name: str | None = None,
    options: dict[str, str] | None = None,
):
    """``spark.read.format("pumice")`` over a store directory (registers the format first)."""
    spark.dataSource.register(PumiceDataSource)
    reader = spark.read.format(FORMAT).option("path", path)
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if broker_name:
        reader = reader.option("brokerName", broker_name)
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    return reader.load()
