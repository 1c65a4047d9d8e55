"""``ReindexSource``: the reindex job's own Spark data source (format ``pumice-reindex``).

Reading gives one row per CommitLog record as dispatch sees it (``DISPATCH_SCHEMA``), one
input partition per segment; writing sorted dispatch rows builds ConsumeQueue files
(``target=consumequeue``) or the IndexFiles (``target=index``) with the store's writers.
It exists so the job runs on the Python Data Source API alone (no pandas, unlike mapInArrow).

=====================  =======  =================================================================
option                 mode     meaning
=====================  =======  =================================================================
commitLogPath          read     the CommitLog directory
messageDelayLevel      read     the broker's delay levels (tagsCode of SCHEDULE_TOPIC_XXXX)
target                 write    ``consumequeue`` or ``index``
root                   write    ``consumequeue/`` directory, or the root that gets ``index/``
fileSize               write    mapedFileSizeConsumeQueue
hashSlotNum, indexNum  write    maxHashSlotNum, maxIndexNum
=====================  =======  =================================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from pumice.spark.jobs.reindex_stages import DISPATCH_SCHEMA, dispatch_rows, write_index, write_queues
from pumice.spark.store_files import list_segments


@dataclass
class SegmentPartition(InputPartition):
    path: str


class _DispatchReader(DataSourceReader):
    def __init__(self, commit_log_path: str, delay_levels: str) -> None:
        self.commit_log_path = commit_log_path
        self.delay_levels = delay_levels

    def partitions(self) -> list[InputPartition]:
        return [SegmentPartition(s.path) for s in list_segments(self.commit_log_path)]

    def read(self, partition: InputPartition) -> Iterator:
        if not isinstance(partition, SegmentPartition):
            return iter(())  # no segment: Spark still runs one task, with a placeholder
        return dispatch_rows(partition.path, self.delay_levels)


class _Writer(DataSourceArrowWriter):
    def __init__(self, options) -> None:  # case-insensitive, as Spark passes them
        self.options = options

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        o = self.options
        if o["target"] == "consumequeue":
            write_queues(iterator, o["root"], int(o["fileSize"]))
        elif o["target"] == "index":
            write_index(iterator, o["root"], int(o["hashSlotNum"]), int(o["indexNum"]))
        else:
            raise ValueError(f"unknown target {o['target']!r}")
        return WriterCommitMessage()


class ReindexSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pumice-reindex"

    def schema(self) -> str:
        return DISPATCH_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return _DispatchReader(self.options["commitLogPath"], self.options["messageDelayLevel"])

    def writer(self, schema, overwrite: bool) -> DataSourceWriter:
        return _Writer(self.options)
