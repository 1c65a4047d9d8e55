"""What a Python process Spark starts for the pumice source pays before it does any work.

Spark starts several Python processes for one query (the source's analysis, the driver-side
stream reader, each executor's worker), and each imports ``pumice.spark.data_source`` first: what
only a store-directory read needs must not be imported by a read from brokers."""

from __future__ import annotations

import subprocess
import sys


def test_data_source_module_leaves_the_store_reader_out() -> None:
    probe = (
        "import sys, pumice.spark.data_source; "
        "print(sorted(m for m in sys.modules if m.startswith(('pumice.store', 'pumice.spark.store', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_stream_reader_module_leaves_the_decoding_out() -> None:
    """Spark's driver-side Python processes for a stream (its reader's, the read planner's) only plan:
    the decode (record_columns, pyarrow.compute) is imported by the tasks."""
    probe = (
        "import sys, pumice.spark.data_source, pumice.spark.broker_stream; "
        "print(sorted(m for m in sys.modules if m in ('pumice.spark.record_columns', 'pyarrow.compute')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
