"""Replication benchmark: a master and its slave as real `pumice` processes over loopback.

    python3 -m bench.ha_bench [--role ASYNC_MASTER|SYNC_MASTER] [--seconds 5] [--batch 64] [--producers 4]

Starts `pumice namesrv`, a master (``--role``, ASYNC_FLUSH) and a slave in a temporary
directory; producers in this process send 1 KiB messages with SEND_BATCH_MESSAGE to the
master for ``--seconds``. Prints produced msg/s, how far the slave was behind when the
producers stopped and how long it took to catch up (CommitLog max offsets from
GET_BROKER_RUNTIME_INFO), the replication rate in MB/s, and the CPU each process used.
Under SYNC_MASTER every send waits for the slave's acknowledgement.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

import orjson

from bench.broker_bench import QUEUES, TOPIC, _create_topic, _produce
from bench.processes import cpu_seconds, free_port, start_pumice, stop_all, wait_idle
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand


async def _max_offset(c: RemotingClient, addr: str) -> int:
    r = await c.invoke(addr, RemotingCommand(code=28), timeout_s=10)  # GET_BROKER_RUNTIME_INFO
    return int(orjson.loads(r.body)["table"]["commitLogMaxOffset"])


async def _run(
    master: str, slave: str, seconds: float, batch: int, producers: int, pids: list[int]
) -> tuple[int, int, int, float, float, list[float]]:
    """(messages produced, bytes written, bytes behind at the stop, catch-up seconds, wall
    seconds to caught up, CPU seconds of each pid and of this process meanwhile)."""
    await _create_topic(master, TOPIC)
    info = RemotingClient()
    # one batch first: it makes the brokers create their first CommitLog files
    await _produce(info, master, time.perf_counter() + 0.001, batch, 0, [0])
    base = await _max_offset(info, master)
    for _ in range(200):  # the slave has it before timing starts
        if await _max_offset(info, slave) >= base:
            break
        await asyncio.sleep(0.05)
    print(f"(waited {await asyncio.to_thread(wait_idle, pids):.1f} s for the brokers' file work)")
    produced = [0]
    pc = RemotingClient()
    cpu0 = [*(cpu_seconds(p) for p in pids), time.process_time()]
    t0 = time.perf_counter()
    stop = t0 + seconds
    await asyncio.gather(*(_produce(pc, master, stop, batch, i % QUEUES, produced) for i in range(producers)))
    t_stop = time.perf_counter()
    end = await _max_offset(info, master)
    behind = end - await _max_offset(info, slave)
    for _ in range(6000):
        if await _max_offset(info, slave) >= end:
            break
        await asyncio.sleep(0.01)
    t_caught = time.perf_counter()
    cpu = [b - a for a, b in zip(cpu0, [*(cpu_seconds(p) for p in pids), time.process_time()], strict=True)]
    await pc.close()
    await info.close()
    return produced[0], end - base, behind, t_caught - t_stop, t_caught - t0, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=["ASYNC_MASTER", "SYNC_MASTER"], default="ASYNC_MASTER")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--producers", type=int, default=4)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pumice-ha-bench-", dir=os.path.dirname(os.path.abspath(__file__)))
    ns_port, m_port, s_port = free_port(), free_port(), free_port()
    with open(os.path.join(root, "ns.conf"), "w") as f:
        f.write(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={root}/kv.json\n")
    common = (f"brokerName=bench-ha\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{ns_port}\n"
              "fastListenPortEnable=false\n")  # fmt: skip
    for name, port, role, bid in (("master", m_port, args.role, 0), ("slave", s_port, "SLAVE", 1)):
        with open(os.path.join(root, f"{name}.conf"), "w") as f:
            f.write(f"{common}listenPort={port}\nbrokerRole={role}\nbrokerId={bid}\nstorePathRootDir={root}/{name}\n")
    procs = [start_pumice(["namesrv", "-c", f"{root}/ns.conf"])]
    try:
        procs.append(start_pumice(["broker", "-c", f"{root}/master.conf"]))
        procs.append(start_pumice(["broker", "-c", f"{root}/slave.conf"]))
        m_pid, s_pid = procs[1].pid, procs[2].pid
        n, size, behind, catch_up, wall, (m_cpu, s_cpu, own) = asyncio.run(
            _run(f"127.0.0.1:{m_port}", f"127.0.0.1:{s_port}", args.seconds, args.batch, args.producers, [m_pid, s_pid])
        )
        print(f"{args.role}, batches of {args.batch}, {args.producers} producers: produced {n / args.seconds:,.0f} "
              f"msg/s; slave {behind / 2**20:.1f} MiB behind at the stop, caught up {catch_up * 1000:.0f} ms "
              f"later; replicated {size / 2**20 / wall:.0f} MiB/s")  # fmt: skip
        print(f"  CPU: master {m_cpu / wall:.0%} of a core, slave {s_cpu / wall:.0%}, this client {own / wall:.0%}")
    finally:
        stop_all(procs, root)


if __name__ == "__main__":
    main()
