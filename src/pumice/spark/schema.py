"""The row schema of the ``pumice`` data source: one row per message.

Every read (store directory now; brokers and streams later) yields these columns, in this
order. Types are Spark SQL types; the Arrow types are what ``DataSourceReader.read`` yields.

===============  =====================  =====================================================
column           type                   from the CommitLog record
===============  =====================  =====================================================
topic            string                 TOPIC
brokerName       string                 the ``brokerName`` option (the record does not hold it)
queueId          int                    QUEUEID
queueOffset      bigint                 QUEUEOFFSET; via a ConsumeQueue, the entry's position
commitLogOffset  bigint                 PHYSICALOFFSET
msgId            string                 the id RocketMQ shows as a message's MsgId
                                        (``SendResult``, ``MessageExt.getMsgId()``, mqadmin):
                                        property UNIQ_KEY, the id the producer made, or
                                        offsetMsgId for a message without one (ali-ons,
                                        older clients, some batch senders), as Java's
                                        ``MessageClientExt.getMsgId()``; the raw property is
                                        ``properties["UNIQ_KEY"]``
offsetMsgId      string                 the broker's id, RocketMQ's offsetMsgId: STOREHOST
                                        bytes, port, PHYSICALOFFSET as upper-case hex (32
                                        characters; 56 for an IPv6 host)
keys             string (null: none)    property KEYS (space-separated keys)
tags             string (null: none)    property TAGS
body             binary                 BODY, zlib-inflated when SYSFLAG bit 0 (compressed)
properties       map<string,string>     PROPERTIES (``name\\x01value\\x02…``); null in a broker
                                        read with ``includeProperties=false``
bornTimestamp    timestamp              BORNTIMESTAMP (ms since the epoch)
storeTimestamp   timestamp              STORETIMESTAMP (ms since the epoch)
bornHost         string                 BORNHOST as ``ip:port`` (``[ipv6]:port``)
storeHost        string                 STOREHOSTADDRESS as ``ip:port`` (``[ipv6]:port``)
reconsumeTimes   int                    RECONSUMETIMES
sysFlag          int                    SYSFLAG as stored (bit 0 still says the body *was*
                                        compressed)
===============  =====================  =====================================================

A properties string may not name the same property twice (RocketMQ writes a map); a pair
with an empty name or value is dropped, as the store's decoder does. msgId, keys and tags come
from the properties, and are filled in a broker read with ``includeProperties=false`` too.
Before issue 21 the column named msgId held the offsetMsgId, and there was no UNIQ_KEY column.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark and pyarrow come with the optional `spark` extra
    import pyarrow as pa
    from pyspark.sql.types import StructType

# (name, Spark SQL type, nullable), in column order
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("topic", "string", False),
    ("brokerName", "string", False),
    ("queueId", "int", False),
    ("queueOffset", "bigint", False),
    ("commitLogOffset", "bigint", False),
    ("msgId", "string", False),
    ("offsetMsgId", "string", False),
    ("keys", "string", True),
    ("tags", "string", True),
    ("body", "binary", False),
    ("properties", "map<string,string>", False),
    ("bornTimestamp", "timestamp", False),
    ("storeTimestamp", "timestamp", False),
    ("bornHost", "string", False),
    ("storeHost", "string", False),
    ("reconsumeTimes", "int", False),
    ("sysFlag", "int", False),
)


def spark_schema(nullable_properties: bool = False) -> StructType:
    """The schema as a new Spark ``StructType`` (``StructType.add`` changes its object, so each
    caller gets its own; built without a session: workers have none). ``nullable_properties``:
    the broker read's ``includeProperties=false`` form, whose properties column is null."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    types = {
        "string": StringType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "binary": BinaryType(),
        "map<string,string>": MapType(StringType(), StringType(), valueContainsNull=True),
        "timestamp": TimestampType(),
    }
    return StructType(
        [
            StructField(name, types[typ], nullable or (nullable_properties and name == "properties"))
            for name, typ, nullable in COLUMNS
        ]
    )


@lru_cache(maxsize=2)
def arrow_schema(nullable_properties: bool = False) -> pa.Schema:
    """The Arrow schema of the batches ``read()`` yields: Spark's own mapping of
    ``spark_schema()``, which the worker compares batches against exactly."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(nullable_properties), timezone="UTC")
