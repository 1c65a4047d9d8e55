"""Helpers the test suites share (import them from here: never from a conftest, a test module or bench/).

Polling and ports:

* ``waiting``: ``eventually`` / ``eventually_async`` (poll until truthy, bounded), and their
  presets for state in the test's own process, ``wait_until`` and ``wait_dispatched``.
* ``ports``: ``free_port()``, a loopback port P with P - 2 .. P + 2 free, below the ephemeral range.
* ``parallel``: the parallel run (pytest-xdist): each worker's port slice, the Maven lock, the
  ``xdist_group`` of the tests that must not overlap.

In-process stores and brokers:

* ``store``: ``small_config``, ``opened`` / ``start_store``, ``read_queue``; ``crash``, ``Rec``,
  ``zero_tail`` / ``write_at`` (a killed store, damaged CommitLog bytes).
* ``golden``: GOLDEN.md's bytes that several tests check (REC_3A, REC_3C, BLANK_8, CQ_3A, ENTRIES_6A).
* ``fakes``: ``FakeChannel``, a client connection handed to processors.
* ``broker``: the AdminBrokerProcessor harness (``run``, ``Harness``, request fields) and a
  ``loopback_controller`` with ``serving``.

Processes and clients:

* ``clusters``: `pumice namesrv` / `pumice broker` processes (``start``, ``stop``, ``Cluster``,
  ``RetentionCluster``, ``HACluster``, ``running_cluster``, ``running_namesrv``) and raw
  requests (``send``, ``pull``, ``register``); ``run`` a coroutine with a bound.
* ``clients``: Pumice clients against them (``create_topic``, ``responding``, SQL92 consumers, ``FAST``).
* ``request_codes``: docs/COMPATIBILITY.md's request-code table and RocketMQ 4.9.8's codes.
* ``faults``: the fault suite's loop disk, ``FaultCluster`` and ``verify`` of acknowledged messages.

Java and Spark:

* ``java_driver``: the Java client driver (tests/java) as processes (``JavaDriver``, ``build_jar``).
* ``maven``: the Java peers' Maven builds (``package``): a project's classpath, Maven run only when not current.
* ``mqadmin``: RocketMQ's mqadmin as a user runs it (``MQAdmin``, ``mqadmin_classpath``).
* ``interop``: the Pumice side of tests/interop (``InteropCluster``, ``create_topic``, ``wait_members``).
* ``spark``: the tests' SparkSession (``spark_session``), the API-written store
  (``build_api_store``, ``BuiltStore``) and broker reads (``create_topic``, ``read``).

Helper modules used by one suite alone stay beside it: tests/integration/cpp_client.py (the C++
client, also run as a script), tests/oracle/rocketmq_peer.py and workload.py (RocketMQ's own
broker and the workload written to it), tests/spark/expected.py, tests/crash/store_worker.py.
"""
