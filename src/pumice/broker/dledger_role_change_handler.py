"""DLedgerRoleChangeHandler: a DLedger node's role changes become the broker's (RocketMQ 4.9's
``broker/dledger/DLedgerRoleChangeHandler``).

=========  ===================================================================================
role       what the broker does
=========  ===================================================================================
CANDIDATE  ``change_to_slave(node number + 1)``, unless it is a slave already (so a node lists
           as a slave before it has heard of any leader, as 4.9's do)
FOLLOWER   ``change_to_slave(node number + 1)``
LEADER     waits, polling every 100 ms, until dispatch has caught up with the committed
           entries, giving up if leadership is lost meanwhile; then rebuilds the queues' next
           offsets from the ConsumeQueues and the entries not committed yet
           (``recoverTopicQueueTable``) and ``change_to_master(SYNC_MASTER)``
=========  ===================================================================================

DLedger reports changes on its own thread; the handler runs them one at a time on the
broker's event loop, in the order reported (4.9's single-thread executor), and logs each at
INFO once.

4.9 also waits for ``ledgerEndIndex == committedIndex``. Pumice's DLedger commits an entry of
an earlier term only with one of the current term (Raft's rule); the new leader's term-start
record (``pumice.dledger.term_start_record``) commits them soon, but the broker does not wait
for it: the new leader counts their queue offsets from the entries themselves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from pumice.store.message_store_config import BrokerRole

log = logging.getLogger(__name__)

LEADER_POLL_S = 0.1

CANDIDATE = "CANDIDATE"
FOLLOWER = "FOLLOWER"
LEADER = "LEADER"


class LeaderState(Protocol):
    """What the handler reads of the log (``ReplicatedLog`` has it)."""

    @property
    def committed_index(self) -> int: ...

    @property
    def ledger_end_index(self) -> int: ...

    def is_leader(self) -> bool: ...


class RoleTarget(Protocol):
    """What the handler changes (``BrokerController``)."""

    @property
    def broker_role(self) -> BrokerRole: ...

    def dispatch_behind_bytes(self) -> int: ...

    def recover_topic_queue_table(self) -> None: ...

    async def change_to_slave(self, broker_id: int) -> None: ...

    async def change_to_master(self, role: BrokerRole) -> None: ...


class DLedgerRoleChangeHandler:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, log_state: LeaderState, target: RoleTarget, node_number: int
    ) -> None:
        self.loop = loop
        self.log_state = log_state
        self.target = target
        self.slave_id = node_number + 1  # 4.9: parseInt(selfId.substring(1)) + 1, never 0
        self._lock = asyncio.Lock()  # one change at a time, in the order reported
        self.changes = 0  # changes handled (tests, runtime info)

    def handle(self, term: int, role: str) -> None:
        """DLedger's role-change callback (any thread), the role by name: queued for the broker's loop."""
        log.debug("DLedger role changed to %s in term %d", role, term)  # the elector logs it at INFO
        asyncio.run_coroutine_threadsafe(self._run(self._change(term, role)), self.loop)

    async def _run(self, change: Awaitable[None]) -> None:
        async with self._lock:
            try:
                await change
            except Exception:  # the next change must still run
                log.exception("role change failed")
            self.changes += 1

    async def _change(self, term: int, role: str) -> None:
        if role == CANDIDATE:
            if self.target.broker_role is not BrokerRole.SLAVE:
                await self.target.change_to_slave(self.slave_id)
        elif role == FOLLOWER:
            await self.target.change_to_slave(self.slave_id)
        elif role == LEADER:
            if not await self._caught_up(term):
                return
            self.target.recover_topic_queue_table()
            await self.target.change_to_master(BrokerRole.SYNC_MASTER)
        log.info("broker role is %s after DLedger's %s of term %d", self.target.broker_role.name, role, term)

    async def _caught_up(self, term: int, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> bool:
        """Every committed entry dispatched; False once leadership is lost."""
        state = self.log_state
        waited = 0
        while True:
            if not state.is_leader():
                log.info("leadership of term %d lost before the broker became master", term)
                return False
            end = state.ledger_end_index
            if end == -1 or self.target.dispatch_behind_bytes() <= 0:
                if waited:
                    log.info("leader of term %d caught up after %.1f s", term, waited * LEADER_POLL_S)
                return True
            waited += 1
            await sleep(LEADER_POLL_S)
