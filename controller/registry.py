"""The job registry: create, join (rendezvous), heartbeat, leave and delete jobs on the switches.

The switch is the source of truth: every job is on the switch from its
creation (the inert record entry of `JobTable`), and an *active* job has,
besides, one `job_table` and one `result_dest` entry per rank and its
multicast group. The registry's memory is a cache of that plus what the
switch cannot hold (ranks that joined a job still waiting for others,
heartbeats); `recover()` rebuilds it after a restart, so a new controller
neither forgets jobs nor allocates their slots twice.

All methods run on one asyncio loop; writes to one switch are serialized
by that switch's lock so batches never interleave.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from dataclasses import dataclass, field

import grpc

from contracts.protocol import MAX_JOBS
from controller.addresses import format_ipv4
from controller.allocator import SlotAllocator, SlotRange
from controller.config import SwitchConfig, Topology, check_world_size
from controller.errors import ConfigError, ControllerError, JobError, PoolExhausted
from controller.job import Job, Worker, job_group, new_secret
from controller.p4switch import SwitchSession, Update
from controller.program import ProgramFacts, program_facts
from controller.tables.counters import Counters, CounterValue
from controller.tables.job_groups import JobGroups
from controller.tables.job_table import RECORD_RANK, JobRow, JobTable, record_slots
from controller.tables.result_dest import ResultDest
from controller.workers import resolve_worker

log = logging.getLogger("controller.registry")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


MIN_POOL_SIZE = 2  # a call uses half of its job's pool (docs/protocol.md, *Host rules*)


@dataclass
class SwitchState:
    config: SwitchConfig
    session: SwitchSession
    facts: ProgramFacts
    allocator: SlotAllocator
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class JoinAddress:
    ipv4: str
    udp_port: int
    mac: str = ""
    switch_port: int = 0


class JobRegistry:
    def __init__(
        self,
        topology: Topology,
        sessions: dict[str, SwitchSession],
        *,
        lease_seconds: float,
        default_pool_size: int,
        join_timeout: float,
    ) -> None:
        self.topology = topology
        self.lease_seconds = lease_seconds
        self.default_pool_size = default_pool_size
        self.join_timeout = join_timeout
        self._switches = {}
        for cfg in topology.switches:
            session = sessions[cfg.name]
            facts = program_facts(session.schema, session.where)
            self._switches[cfg.name] = SwitchState(cfg, session, facts, SlotAllocator(facts.slot_count))
        self._jobs: dict[str, Job] = {}
        self._changed: dict[int, asyncio.Event] = {}  # job id -> set when installed or deleted
        self._joining: dict[int, int] = {}  # job id -> joins waiting in rendezvous
        self._next_id = 1
        self.job_table = JobTable()
        self.result_dest = ResultDest()
        self.groups = JobGroups()
        self.counters = Counters()

    # ---- queries -------------------------------------------------------------------------------

    def get(self, name: str) -> Job:
        job = self._jobs.get(name)
        if job is None:
            raise JobError(f"unknown job {name!r}", grpc.StatusCode.NOT_FOUND)
        return job

    def jobs(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda j: j.job_id)

    def switch_config(self, name: str) -> SwitchConfig:
        return self._switch(name).config

    def program(self, name: str) -> ProgramFacts:
        """K and the slot count of the pipeline switch `name` runs."""
        return self._switch(name).facts

    def _switch(self, name: str) -> SwitchState:
        try:
            return self._switches[self.topology.switch(name).name]
        except ConfigError as exc:
            raise JobError(str(exc), grpc.StatusCode.NOT_FOUND) from None

    # ---- create / delete -----------------------------------------------------------------------

    async def create(self, name: str, world_size: int, pool_size: int = 0, switch: str = "") -> Job:
        if not _NAME.match(name):
            raise JobError(
                f"job name {name!r} must be 1-64 characters of letters, digits, '.', '_' or '-'",
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        try:
            check_world_size(world_size)
        except ConfigError as exc:
            raise JobError(str(exc), grpc.StatusCode.INVALID_ARGUMENT) from None
        if name in self._jobs:
            raise JobError(f"job {name!r} already exists", grpc.StatusCode.ALREADY_EXISTS)
        state = self._switch(switch)
        async with state.lock:
            if name in self._jobs:  # created while we waited for the lock
                raise JobError(f"job {name!r} already exists", grpc.StatusCode.ALREADY_EXISTS)
            if self._next_id >= MAX_JOBS:
                raise PoolExhausted(
                    f"job ids 1..{MAX_JOBS - 1} are used up; push the pipeline again "
                    "(`p4reduce-ctl pipeline push --force`) to clear the switch and start over"
                )
            size = pool_size or self.default_pool_size
            if size < MIN_POOL_SIZE:
                raise JobError(
                    f"pool size {size} is below {MIN_POOL_SIZE}: each call uses half of its job's pool",
                    grpc.StatusCode.INVALID_ARGUMENT,
                )
            slots = state.allocator.allocate(size)
            job_id = self._next_id
            self._next_id += 1
            job = Job(name, job_id, state.config.name, world_size, slots, job_group(job_id))
            try:
                await state.session.write([self.job_table.record("+", job)])
            except ControllerError:
                state.allocator.release(slots)
                raise
            self._jobs[name] = job
            self._changed[job_id] = asyncio.Event()
        log.info("created job %r: id %d, %d ranks, slots %s, group %d on %s",
                 name, job_id, world_size, slots, job.group, job.switch)  # fmt: skip
        return job

    async def delete(self, name: str, reason: str = "deleted") -> None:
        job = self.get(name)
        state = self._switches[job.switch]
        async with state.lock:
            if self._jobs.get(name) is not job:
                return  # deleted meanwhile
            updates = []
            present = [w for w in job.workers.values() if w.rank not in job.left]  # the left are gone already
            if job.installed:
                updates += [self.job_table.rank_entry("-", job, w) for w in present]
            updates.append(self.job_table.record("-", job))
            if job.installed:
                updates += [self.result_dest.entry("-", job, w) for w in present]
                updates.append(self.groups.delete(job.group))
            await state.session.write(updates)
            del self._jobs[name]
            state.allocator.release(job.slots)
            self._changed.pop(job.job_id).set()
        log.info("%s job %r (id %d): freed slots %s", reason, name, job.job_id, job.slots)

    # ---- rendezvous ----------------------------------------------------------------------------

    async def join(
        self, name: str, rank: int, world_size: int, address: JoinAddress, timeout: float = 0
    ) -> Job:
        """Register `rank` of job `name` and wait until every rank has; every rank gets the same job."""
        job = self._jobs.get(name)
        if job is None:
            if not world_size:
                raise JobError(
                    f"unknown job {name!r} (give world_size to create it)", grpc.StatusCode.NOT_FOUND
                )
            self._resolve(self.topology.switch().name, rank, address)  # a bad request creates nothing
            if not 0 <= rank < world_size:
                raise JobError(f"rank {rank} is outside 0..{world_size - 1}", grpc.StatusCode.OUT_OF_RANGE)
            try:
                job = await self.create(name, world_size)
            except JobError as exc:
                if exc.status != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                job = self.get(name)  # another rank created it first
        if world_size and world_size != job.world_size:
            raise JobError(
                f"job {name!r} has world size {job.world_size}, not {world_size}",
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        if not 0 <= rank < job.world_size:
            raise JobError(
                f"rank {rank} is outside 0..{job.world_size - 1} of job {name!r}",
                grpc.StatusCode.OUT_OF_RANGE,
            )
        self._admit(job, self._resolve(job.switch, rank, address))
        job.heartbeats[rank] = time.monotonic()
        if not job.missing_ranks() and not job.installed:
            await self._install(job)
        if job.installed:
            return job
        return await self._rendezvous(job, timeout or self.join_timeout)

    def _resolve(self, switch: str, rank: int, a: JoinAddress) -> Worker:
        config = self._switches[switch].config
        return resolve_worker(self.topology, config, rank, a.ipv4, a.udp_port, a.mac, a.switch_port)

    def _admit(self, job: Job, worker: Worker) -> None:
        if worker.rank in job.left:
            raise JobError(
                f"rank {worker.rank} has left job {job.name!r}; its slots' state is gone with it, "
                "so delete the job and start again",
                grpc.StatusCode.FAILED_PRECONDITION,
            )
        known = job.workers.get(worker.rank)
        if known is not None:
            if not known.same_place(worker):
                raise JobError(
                    f"rank {worker.rank} of job {job.name!r} already joined from {known}",
                    grpc.StatusCode.ALREADY_EXISTS,
                )
            return  # the same worker asking again (a retried join): it keeps its key
        for other in job.workers.values():
            if (other.ipv4, other.udp_port) == (worker.ipv4, worker.udp_port):
                raise JobError(
                    f"{format_ipv4(worker.ipv4)}:{worker.udp_port} already joined job {job.name!r} "
                    f"as rank {other.rank}",
                    grpc.StatusCode.ALREADY_EXISTS,
                )
        job.workers[worker.rank] = dataclasses.replace(worker, key=new_secret())
        log.info("job %r: rank %d joined from %s (%d of %d)",
                 job.name, worker.rank, worker, len(job.workers), job.world_size)  # fmt: skip

    async def _install(self, job: Job) -> None:
        state = self._switches[job.switch]
        async with state.lock:
            if job.installed or self._jobs.get(job.name) is not job:
                return
            workers = [job.workers[r] for r in range(job.world_size)]
            updates: list[Update] = [self.groups.insert(job)]
            updates += [self.result_dest.entry("+", job, w) for w in workers]
            updates += [self.job_table.rank_entry("+", job, w) for w in workers]
            await state.session.write(updates)
            job.installed = True
            self._changed[job.job_id].set()
        log.info("job %r (id %d) installed: %d ranks, slots %s, group %d",
                 job.name, job.job_id, job.world_size, job.slots, job.group)  # fmt: skip

    async def _rendezvous(self, job: Job, timeout: float) -> Job:
        event = self._changed[job.job_id]
        self._joining[job.job_id] = self._joining.get(job.job_id, 0) + 1
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            missing = job.missing_ranks()
            raise JobError(
                f"{len(job.workers)} of {job.world_size} ranks joined job {job.name!r} within {timeout:g} s "
                f"(missing ranks {', '.join(map(str, missing))}); joining again keeps waiting",
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ) from None
        finally:
            self._joining[job.job_id] -= 1
            for rank in job.workers:  # waiting in a join is a sign of life
                job.heartbeats[rank] = max(job.heartbeats.get(rank, 0.0), time.monotonic())
        if self._jobs.get(job.name) is not job:
            raise JobError(
                f"job {job.name!r} was deleted while rank(s) waited to join", grpc.StatusCode.ABORTED
            )
        return job

    # ---- leases --------------------------------------------------------------------------------

    @staticmethod
    def _check_member(job: Job, rank: int) -> None:
        status = grpc.StatusCode.FAILED_PRECONDITION
        if rank in job.left:
            raise JobError(f"rank {rank} has left job {job.name!r}", status)
        if rank not in job.workers:
            raise JobError(f"rank {rank} has not joined job {job.name!r}", status)

    def heartbeat(self, name: str, rank: int) -> float:
        job = self.get(name)
        self._check_member(job, rank)
        job.heartbeats[rank] = time.monotonic()
        return self.lease_seconds

    async def leave(self, name: str, rank: int) -> None:
        """A rank is done: while waiting it may join again; once active, the last rank out deletes the job."""
        job = self.get(name)
        self._check_member(job, rank)
        job.heartbeats.pop(rank, None)
        if not job.installed:
            del job.workers[rank]
            log.info("job %r: rank %d left before the job started", name, rank)
            return
        if len(job.left) + 1 == job.world_size:
            await self.delete(name, f"rank {rank} left and so has every other rank:")
            return
        await self._remove_rank(job, rank)
        log.info("job %r: rank %d left; its entries are gone from the switch", name, rank)

    async def _remove_rank(self, job: Job, rank: int) -> None:
        """A departed rank's address and key are never trusted again: its entries go at once."""
        state = self._switches[job.switch]
        async with state.lock:
            if self._jobs.get(job.name) is not job or rank in job.left:
                return
            worker = job.workers[rank]
            job.left.add(rank)
            await state.session.write(
                [
                    self.job_table.rank_entry("-", job, worker),
                    self.result_dest.entry("-", job, worker),
                    self.groups.modify(job),
                ]
            )

    async def expire(self) -> list[str]:
        """Delete every job whose joined ranks have all been silent for longer than the lease."""
        now, expired = time.monotonic(), []
        for job in list(self._jobs.values()):
            if not job.heartbeats or self._joining.get(job.job_id):
                continue  # nobody joined yet (an operator's job), or ranks are waiting in JoinJob
            silent = now - max(job.heartbeats.values())
            if silent > self.lease_seconds:
                await self.delete(job.name, f"lease expired ({silent:.1f} s > {self.lease_seconds:g} s):")
                expired.append(job.name)
        return expired

    # ---- counters ------------------------------------------------------------------------------

    async def read_counters(self, job_name: str = "", switch: str = "") -> list[CounterValue]:
        job = self.get(job_name) if job_name else None
        state = self._switches[job.switch] if job else self._switch(switch)
        names = {j.job_id: j.name for j in self._jobs.values() if j.switch == state.config.name}
        counts = await self.counters.job_counters(state.session, job.job_id if job else None)
        values = []
        for counter, per_job in counts.items():
            for job_id, (packets, octets) in sorted(per_job.items()):
                if job or packets or job_id in names:
                    label = names.get(job_id, f"job-{job_id}")
                    values.append(CounterValue(counter, job_id, label, packets, octets))
        if job is None:
            values += await self.counters.drop_counters(state.session)
        return values

    # ---- recovery ------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild the jobs from the switches' tables; remove what half-finished writes left behind."""
        highest = 0
        for state in self._switches.values():
            async with state.lock:
                highest = max(highest, await self._recover_switch(state))
        self._next_id = highest + 1
        log.info("recovered %d job(s); next job id %d", len(self._jobs), self._next_id)

    async def _recover_switch(self, state: SwitchState) -> int:
        session = state.session
        rows = await self.job_table.read(session)
        dests = {(d.job_id, d.rank): d for d in await self.result_dest.read(session)}
        groups = await self.groups.read(session)
        used_ids = await self.counters.used_job_ids(session)
        by_job: dict[int, dict[int, JobRow]] = {}
        for row in rows:
            by_job.setdefault(row.job_id, {})[row.rank] = row
        cleanup: list[Update] = []
        now = time.monotonic()
        for job_id, ranks in sorted(by_job.items()):
            job = self._job_from_rows(state, job_id, ranks)
            if job is None:
                cleanup += [self.job_table.delete_key(job_id, r) for r in ranks]
                continue
            workers = {}
            for rank in range(job.world_size):
                row, dest = ranks.get(rank), dests.get((job_id, rank))
                if row is not None and dest is not None:
                    workers[rank] = Worker(
                        rank, row.sender_ip, row.sender_udp_port, dest.mac, row.sender_port, row.key
                    )
            expected = sorted((w.switch_port, w.rank) for w in workers.values())
            if workers and sorted(groups.get(job.group, [])) == expected:
                # An active job; ranks without entries left it (LeaveJob removes a rank's entries).
                job.workers, job.installed = workers, True
                job.left = set(range(job.world_size)) - set(workers)
                job.heartbeats = dict.fromkeys(workers, now)  # the lease starts again
            else:  # a waiting job (ranks rejoin) or a half-written install
                cleanup += [self.job_table.delete_key(job_id, r) for r in ranks if r != RECORD_RANK]
            if RECORD_RANK not in ranks:
                cleanup.append(self.job_table.record("+", job))
            self._jobs[job.name] = job
            self._changed[job_id] = asyncio.Event()
            log.info("recovered job %r (id %d, %s, slots %s)", job.name, job_id, job.state, job.slots)
        live = {(j.job_id, r) for j in self._jobs.values() if j.installed for r in j.workers}
        cleanup += [self.result_dest.delete_key(*key) for key in sorted(dests) if key not in live]
        live_groups = {j.group for j in self._jobs.values() if j.installed}
        cleanup += [self.groups.delete(g) for g in sorted(groups) if g not in live_groups]
        if cleanup:
            log.info("switch %s: removing %d stale entries", state.config.name, len(cleanup))
            await session.write(cleanup)
        return max([*by_job, *used_ids, 0])

    def _job_from_rows(self, state: SwitchState, job_id: int, ranks: dict[int, JobRow]) -> Job | None:
        record = ranks.get(RECORD_RANK)
        if record is not None:
            slots = record_slots(record)
        else:
            any_row = next(iter(ranks.values()))
            record, slots = any_row, SlotRange(any_row.base, any_row.pool_size)
        name = record.metadata.get("name")
        if not isinstance(name, str) or not _NAME.match(name) or name in self._jobs:
            name = f"job-{job_id}"
        try:
            state.allocator.reserve(slots)
        except JobError as exc:
            log.error("switch %s: job id %d cannot be recovered (%s); removing its entries",
                      state.config.name, job_id, exc)  # fmt: skip
            return None
        return Job(name, job_id, state.config.name, record.num_workers, slots, record.mcast_grp, record.epoch)
