"""``PumiceDataSource``: the ``pumice`` format for ``spark.read``, on PySpark's Python Data Source API.

    spark.read.format("pumice").load("/data/store")                       # every message
    spark.read.format("pumice").option("topic", "TopicA").load("/data/store")

The schema is fixed (``pumice.spark.schema``); the options are in ``pumice.spark.options``.
A store directory is read with no broker in between (``pumice.spark.store_reader``).
Reading from brokers, streaming and writing are later phases; they will be further methods
of this class (``streamReader``, ``writer``) over the same schema.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from pumice.spark.options import ReadOptions
from pumice.spark.schema import spark_schema
from pumice.spark.store_reader import StoreDirectoryReader

FORMAT = "pumice"


class PumiceDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        if schema != spark_schema():
            raise ValueError(f"the {FORMAT} source has a fixed schema; read without .schema(...)")
        return StoreDirectoryReader(ReadOptions.parse(self.options))


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
