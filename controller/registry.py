"""The job registry: create, join (rendezvous), heartbeat, leave and delete jobs on the switches.

The switch is the source of truth: every job is on the switch from its
creation (the inert record entry of `JobTable`), and an *active* job has,
besides, one `job_table` and one `result_dest` entry per rank and its
multicast group. The registry's memory is a cache of that plus what the
switch cannot hold (ranks that joined a job still waiting for others,
heartbeats); `recover()` rebuilds it after a controller restart, so a new
controller neither forgets jobs nor allocates their slots twice, and
`attach()` does the reverse after the *switch* restarted: it makes the
switch hold every job of the registry again (a job whose state the switch
lost comes back with a new epoch, new keys and the next generation, and its
ranks are told: contracts/jobapi.proto, WatchJob and ResumeJob).

Every method that acts on a job takes the `Caller` (controller/auth.py) and
checks it holds the job's credential. All methods run on one asyncio loop;
writes to one switch are serialized by that switch's lock so batches never
interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from controller.addresses import format_ipv4
from controller.allocator import SlotAllocator, SlotRange
from controller.auth import Caller, check_credential, credential_hash, new_credential
from controller.config import (
    DEFAULT_DISCONNECT_GRACE,
    MIN_POOL_SIZE,
    SwitchConfig,
    Topology,
    check_world_size,
)
from controller.errors import (
    ConfigError,
    ControllerError,
    JobError,
    PoolExhausted,
    QuotaExceeded,
    SwitchError,
)
from controller.fabric import tree_for
from controller.job import Job, JobEvent, Part, Worker, job_group, new_secret
from controller.job_ids import JobIds
from controller.p4switch import SwitchSession, Update
from controller.program import ProgramFacts, program_facts
from controller.quotas import Quotas
from controller.tables.counters import Counters, CounterValue
from controller.tables.job_groups import JobGroups
from controller.tables.job_table import RECORD_RANK, JobRow, JobTable, record_slots, tree_parts
from controller.tables.result_dest import ResultDest, ResultDestRow
from controller.trees import TreeEntries, check_same_program, plan_parts
from controller.workers import resolve_worker

log = logging.getLogger("controller.registry")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def shown(name: str, limit: int = 64) -> str:
    """A client's string in an error message: quoted, and cut when it is longer than any valid name."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}... ({len(name)} characters)"


# What a switch holds of jobs: job_table rows by job and rank, result_dest rows by (job, rank),
# and the groups' replicas
_Read = tuple[
    dict[int, dict[int, JobRow]], dict[tuple[int, int], ResultDestRow], dict[int, list[tuple[int, int]]]
]


@dataclass
class SwitchState:
    config: SwitchConfig
    session: SwitchSession
    facts: ProgramFacts
    allocator: SlotAllocator
    ids: JobIds
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class SwitchSnapshot:
    """One switch at one moment: its slots, its jobs and every counter of the program."""

    name: str
    slots: int
    free_slots: int
    jobs: list[Job]
    job_counters: dict[str, dict[int, tuple[int, int]]]  # counter -> {job id: (packets, bytes)}
    drops: list[CounterValue]
    error: str = ""  # why the counters could not be read ('' when they were)


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
        id_quarantine: float = 10.0,
        disconnect_grace: float = DEFAULT_DISCONNECT_GRACE,
    ) -> None:
        self.topology = topology
        self.lease_seconds = lease_seconds
        self.disconnect_grace = min(disconnect_grace, lease_seconds)  # the lease bounds it anyway
        self._expiring = asyncio.Lock()  # expire() runs from the lease task and after each closed stream
        self._expiry_checks: set[asyncio.TimerHandle | asyncio.Task[list[str]]] = set()
        self.default_pool_size = default_pool_size
        self.join_timeout = join_timeout
        self._switches = {}
        for cfg in topology.switches:
            session = sessions[cfg.name]
            facts = program_facts(session.schema, session.where)
            allocator = SlotAllocator(facts.slot_count)
            self._switches[cfg.name] = SwitchState(cfg, session, facts, allocator, JobIds(id_quarantine))
        self._jobs: dict[str, Job] = {}
        self._changed: dict[int, asyncio.Event] = {}  # job id -> set when installed or deleted
        self._joining: dict[int, Counter[int]] = {}  # job id -> ranks waiting in rendezvous
        self.quotas = Quotas(topology.tenants)
        self.job_table = JobTable()
        self.result_dest = ResultDest()
        self.groups = JobGroups()
        self.counters = Counters()
        self.trees = TreeEntries({name: state.config for name, state in self._switches.items()})

    # ---- queries -------------------------------------------------------------------------------

    def _find(self, name: str) -> Job:
        job = self._jobs.get(name)
        if job is None:
            raise JobError(f"unknown job {shown(name)}", grpc.StatusCode.NOT_FOUND)
        return job

    def get(self, name: str, caller: Caller) -> Job:
        job = self._find(name)
        caller.require(job.credential_hash, job.name)
        return job

    def jobs(self, caller: Caller | None = None) -> list[Job]:
        """Every job (None: the operator's view), or the jobs `caller` holds the credential of."""
        jobs = self._jobs.values()
        if caller is not None:
            jobs = [j for j in jobs if caller.holds(j.credential_hash)]
        return sorted(jobs, key=lambda j: j.job_id)

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

    async def create(
        self,
        name: str,
        world_size: int,
        pool_size: int = 0,
        switch: str = "",
        *,
        credential: str = "",
        tenant: str = "",
    ) -> tuple[Job, str]:
        """A new job of `tenant` (its quota checked: controller/quotas.py); with the credential its creator
        chose, else one drawn here (returned, else '')."""
        if not _NAME.match(name):
            raise JobError(
                f"job name {shown(name)} must be 1-64 characters of letters, digits, '.', '_' or '-'",
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        try:
            check_world_size(world_size)
        except ConfigError as exc:
            raise JobError(str(exc), grpc.StatusCode.INVALID_ARGUMENT) from None
        size = pool_size or self.default_pool_size
        if size < MIN_POOL_SIZE:
            raise JobError(
                f"pool size {size} is below {MIN_POOL_SIZE}: each call uses half of its job's pool",
                grpc.StatusCode.INVALID_ARGUMENT,
            )
        drawn = ""
        if credential:
            check_credential(credential)
        else:
            credential = drawn = new_credential()
        if name in self._jobs:
            raise JobError(f"job {name!r} already exists", grpc.StatusCode.ALREADY_EXISTS)
        state = self._switch(switch)
        try:
            job = await self._create_on(state, name, world_size, size, credential, tenant)
        except (SwitchError, JobError) as exc:
            if not _no_room_or_down(exc):
                raise
            job = await self._create_elsewhere(state, exc, name, world_size, size, credential, tenant)
        return job, drawn

    async def _create_elsewhere(
        self,
        asked: SwitchState,
        why: ControllerError,
        name: str,
        world_size: int,
        size: int,
        credential: str,
        tenant: str,
    ) -> Job:
        """The job's switch is full or down: on the first aggregation node of last resort (a host running
        p4reduce-switch, config `last_resort: true`) that takes it, saying so; else `why` is raised."""
        for state in self._switches.values():
            if not state.config.last_resort or state is asked:
                continue
            try:
                job = await self._create_on(state, name, world_size, size, credential, tenant)
            except (SwitchError, JobError) as exc:
                if not _no_room_or_down(exc):
                    raise
                log.warning(
                    "job %r: aggregation node %s cannot take it either: %s", name, state.config.name, exc
                )
                continue
            job.placement = (
                f"on aggregation node {state.config.name} (last resort): switch {asked.config.name} "
                f"could not take it: {why}"
            )
            log.warning("job %r placed %s", name, job.placement)
            await state.session.write([self.job_table.record("~", job)])  # the placement survives restarts
            return job
        raise why

    async def _create_on(
        self, state: SwitchState, name: str, world_size: int, size: int, credential: str, tenant: str
    ) -> Job:
        async with state.lock:
            if name in self._jobs:  # created while we waited for the lock
                raise JobError(f"job {name!r} already exists", grpc.StatusCode.ALREADY_EXISTS)
            self.quotas.check(tenant, self._jobs.values(), state.config.name, size)
            slots = state.allocator.allocate(size)
            try:
                job_id = state.ids.take()
            except JobError:
                state.allocator.release(slots)
                raise
            job = Job(name, job_id, state.config.name, world_size, slots, job_group(job_id))
            job.credential_hash = credential_hash(credential)
            job.tenant = tenant
            try:
                await state.session.write([self.job_table.record("+", job)])
            except ControllerError:
                state.allocator.release(slots)
                state.ids.release(job_id)
                raise
            self._jobs[name] = job
            self._changed[job_id] = asyncio.Event()
        await self._reset_counters(state, job)
        log.info("created job %r: id %d, %d ranks, slots %s, group %d on %s",
                 name, job_id, world_size, slots, job.group, job.switch)  # fmt: skip
        return job

    async def _reset_counters(self, state: SwitchState, job: Job) -> None:
        """A recycled id's counters start from zero (a target that cannot write counters keeps them)."""
        try:
            await state.session.write(self.counters.reset(job.job_id))
        except ControllerError as exc:
            log.warning("job %r: its id's counters keep earlier jobs' packets: %s", job.name, exc)

    async def delete(self, name: str, caller: Caller) -> None:
        job = self.get(name, caller)
        await self._delete(job, f"job {job.name!r} was deleted by {caller.describe()}")

    async def _delete(self, job: Job, reason: str, silent_rank: int = 0) -> None:
        """Remove the job from the switch and the registry; its ranks hear `reason` at once."""
        if job.parts:
            await self._delete_tree(job, reason, silent_rank)
            return
        job.ended = reason
        state = self._switches[job.switch]
        async with state.lock:
            if self._jobs.get(job.name) is not job:
                return  # deleted meanwhile
            present = job.present()  # the left are gone already
            updates = []
            if job.installed:
                updates += [self.job_table.rank_entry("-", job, w) for w in present]
            updates.append(self.job_table.record("-", job))
            if job.installed:
                updates += [self.result_dest.entry("-", job, w) for w in present]
                updates.append(self.groups.delete(job.group))
            await state.session.write(updates)
            del self._jobs[job.name]
            state.allocator.release(job.slots)
            state.ids.release(job.job_id)
            self._changed.pop(job.job_id).set()
        job.publish(JobEvent("deleted", reason, job.generation, silent_rank))
        log.info("%s: freed id %d and slots %s", reason, job.job_id, job.slots)

    async def _delete_tree(self, job: Job, reason: str, silent_rank: int) -> None:
        """Remove every part of a tree's job, children first, members before where their results go."""
        job.ended = reason
        async with self._locked({job.switch, *job.parts}):
            if self._jobs.get(job.name) is not job:
                return
            for part in reversed(self.trees.order(job)):
                for updates in self.trees.removal(job, part):
                    await self._switches[part.switch].session.write(updates)
            await self._switches[job.switch].session.write([self.job_table.record("-", job)])
            del self._jobs[job.name]
            for part in job.parts.values():
                if part.switch != job.switch:
                    self._switches[part.switch].allocator.release(part.slots)
                    self._switches[part.switch].ids.release(part.job_id)
            home = self._switches[job.switch]
            home.allocator.release(job.slots)
            home.ids.release(job.job_id)
            self._changed.pop(job.job_id).set()
        job.publish(JobEvent("deleted", reason, job.generation, silent_rank))
        log.info(
            "%s: freed its tree's ids and slots %s",
            reason,
            {p.switch: (p.job_id, str(p.slots)) for p in job.parts.values()},
        )

    # ---- rendezvous ----------------------------------------------------------------------------

    async def join(
        self, name: str, rank: int, world_size: int, address: JoinAddress, caller: Caller, timeout: float = 0
    ) -> tuple[Job, str]:
        """Register `rank` of job `name` and wait until every rank has; every rank gets the same job.

        Returns the job and, when this join created it with a credential drawn here, that credential.
        """
        job = self._jobs.get(name)
        drawn = ""
        if job is None:
            if not world_size:
                raise JobError(
                    f"unknown job {shown(name)} (give world_size to create it)", grpc.StatusCode.NOT_FOUND
                )
            self._resolve(self.topology.switch().name, rank, address)  # a bad request creates nothing
            if not 0 <= rank < world_size:
                raise JobError(f"rank {rank} is outside 0..{world_size - 1}", grpc.StatusCode.OUT_OF_RANGE)
            if world_size > 1 and not caller.credential and not caller.admin:
                raise JobError(
                    f"a JoinJob that creates job {shown(name)} for {world_size} ranks needs a credential "
                    "every rank presents (metadata p4reduce-job-credential: Communicator.join(credential=..."
                    ") or $P4REDUCE_JOB_CREDENTIAL), or the other ranks could not join it",
                    grpc.StatusCode.UNAUTHENTICATED,
                )
            self.quotas.check_creator(caller.tenant, caller.admin)
            try:
                job, drawn = await self.create(
                    name, world_size, credential=caller.credential, tenant=caller.tenant
                )
            except JobError as exc:
                if exc.status != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                job = self._find(name)  # another rank created it first
        caller.require(job.credential_hash, job.name)
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
            return job, drawn
        return await self._rendezvous(job, rank, timeout or self.join_timeout), drawn

    def _resolve(self, switch: str, rank: int, a: JoinAddress) -> Worker:
        """The worker as its switch sees it. A rank is attached to the job's switch unless the topology
        lists its address as a host of exactly one other switch: then the job will be a tree."""
        where = self._rank_switch(switch, a.ipv4)
        config = self._switches[where].config
        worker = resolve_worker(self.topology, config, rank, a.ipv4, a.udp_port, a.mac, a.switch_port)
        return dataclasses.replace(worker, switch=where)

    def _rank_switch(self, switch: str, ipv4: str) -> str:
        if self._switches[switch].config.last_resort:
            return switch  # every rank reaches an aggregation node over IP, on its one port
        try:
            ip = int(ipaddress.IPv4Address(ipv4))
        except ValueError:
            return switch  # resolve_worker says what is wrong with it
        if self.topology.host_by_ipv4(switch, ip) is not None:
            return switch
        others = {h.switch for h in self.topology.hosts if h.ipv4 == ip}
        return others.pop() if len(others) == 1 else switch

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
        if {w.switch or job.switch for w in job.present()} != {job.switch}:
            await self._install_tree(job)
            return
        state = self._switches[job.switch]
        async with state.lock:
            if job.installed or self._jobs.get(job.name) is not job:
                return
            await state.session.write(self._install_updates(job)[1:])
            job.installed = True
            self._changed[job.job_id].set()
        log.info("job %r (id %d) installed: %d ranks, slots %s, group %d",
                 job.name, job.job_id, job.world_size, job.slots, job.group)  # fmt: skip

    @contextlib.asynccontextmanager
    async def _locked(self, switches: set[str]) -> AsyncIterator[None]:
        """Several switches' locks, always taken in name order (no two tasks can wait for each other)."""
        async with contextlib.AsyncExitStack() as stack:
            for name in sorted(switches):
                await stack.enter_async_context(self._switches[name].lock)
            yield

    async def _install_tree(self, job: Job) -> None:
        """Install a job whose ranks sit behind several switches as an aggregation tree
        (docs/protocol.md, *Aggregation trees*): a part on every switch of the tree, parents first.
        A tree that cannot be built or allocated deletes the job, and every waiting rank hears why."""
        ranked = {w.switch or job.switch for w in job.present()}
        try:
            tree = tree_for(self.topology, ranked)
        except ConfigError as exc:
            await self._refuse(job, f"its ranks' switches cannot be joined: {exc}")
            return
        async with self._locked({job.switch, *tree.switches}):
            if job.installed or self._jobs.get(job.name) is not job:
                return
            taken: list[tuple[SwitchState, int, SlotRange]] = []

            def allocate(switch: str) -> tuple[int, SlotRange]:
                state = self._switches[switch]
                self.quotas.check_slots(job.tenant, self._jobs.values(), switch, job.slots.size)
                try:
                    slots = state.allocator.allocate(job.slots.size)
                except PoolExhausted as exc:
                    raise JobError(f"switch {switch} has no room for it: {exc}", exc.status) from None
                try:
                    job_id = state.ids.take()
                except JobError as exc:
                    state.allocator.release(slots)
                    raise JobError(f"switch {switch} has no job id left: {exc}", exc.status) from None
                taken.append((state, job_id, slots))
                return job_id, slots

            facts = {
                s: (self._switches[s].facts.values_per_packet, self._switches[s].facts.trees)
                for s in tree.switches
            }
            try:
                check_same_program(job, tree.switches, facts)
                job.parts = plan_parts(job, tree, allocate)
                for part in self.trees.order(job):
                    for updates in self.trees.install(job, part):
                        await self._switches[part.switch].session.write(updates)
                await self._switches[job.switch].session.write([self.job_table.record("~", job)])
            except (JobError, ControllerError) as exc:
                written, job.parts = job.parts, {}
                await self._remove_parts(job, written)
                for state, job_id, slots in taken:
                    state.allocator.release(slots)
                    state.ids.release(job_id)
                reason = str(exc)
            else:
                reason = ""
                job.installed = True
                self._changed[job.job_id].set()
        if reason:
            await self._refuse(job, reason)
            return
        log.info(
            "job %r (ids %s) installed as a tree rooted at %s: %s",
            job.name,
            {p.switch: p.job_id for p in job.parts.values()},
            job.root,
            "; ".join(tree.describe()),
        )

    async def _refuse(self, job: Job, why: str) -> None:
        """The job cannot be installed: delete it, and raise `why` to the rank whose join completed it
        (the waiting ranks hear it from the deletion)."""
        reason = f"job {job.name!r} cannot be installed: {why}"
        await self._delete(job, reason)
        raise JobError(reason, grpc.StatusCode.RESOURCE_EXHAUSTED)

    async def _remove_parts(self, job: Job, parts: dict[str, Part]) -> None:
        """Best effort: take off the switches what of `parts` is there (an install that failed half way)."""
        for part in reversed(sorted(parts.values(), key=lambda p: p.switch == job.root)):
            state = self._switches[part.switch]
            try:
                await self._clear_ids(state, {part.job_id}, keep_record=part.switch == job.switch)
            except ControllerError as exc:
                log.warning("job %r: could not clear its part on %s: %s", job.name, part.switch, exc)

    async def _clear_ids(self, state: SwitchState, job_ids: set[int], keep_record: bool = False) -> None:
        """Remove every entry of the job ids `job_ids` the switch holds: members first, then the rest."""
        session = state.session
        by_job, dests, groups = await self._read_jobs(session)
        members = [
            self.job_table.delete_key(j, r)
            for j in sorted(job_ids)
            for r in by_job.get(j, {})
            if not (keep_record and r == RECORD_RANK)
        ]
        rest = [self.result_dest.delete_key(j, r) for (j, r) in sorted(dests) if j in job_ids]
        if state.facts.trees:
            rest += [
                self.trees.upstream.delete_key(j)
                for j in await self.trees.upstream.read(session)
                if j in job_ids
            ]
            rest += [
                self.trees.from_parent.delete_key(row.parent_job, row.parent_ip)
                for row in await self.trees.from_parent.read(session)
                if row.job_id in job_ids
            ]
        rest += [self.groups.delete(g) for g in sorted(groups) if g in {job_group(j) for j in job_ids}]
        await session.write(members)
        await session.write(rest)

    def _install_updates(self, job: Job) -> list[Update]:
        """Everything an active job has on the switch, in install order: record, group, result_dest,
        job_table (a DATA can only be accepted once its result can be delivered)."""
        workers = job.present()
        updates: list[Update] = [self.job_table.record("+", job), self.groups.insert(job)]
        updates += [self.result_dest.entry("+", job, w) for w in workers]
        updates += [self.job_table.rank_entry("+", job, w) for w in workers]
        return updates

    async def _rendezvous(self, job: Job, rank: int, timeout: float) -> Job:
        event = self._changed[job.job_id]
        joining = self._joining.setdefault(job.job_id, Counter())
        joining[rank] += 1
        try:
            async with asyncio.timeout(timeout):  # not wait_for, which can swallow a cancellation (3.11)
                await event.wait()
        except TimeoutError:
            missing = job.missing_ranks()
            raise JobError(
                f"{len(job.workers)} of {job.world_size} ranks joined job {job.name!r} within {timeout:g} s "
                f"(missing ranks {', '.join(map(str, missing))}); joining again keeps waiting",
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ) from None
        finally:
            joining[rank] -= 1
            job.heartbeats[rank] = time.monotonic()  # waiting in a join is a sign of life
        if self._jobs.get(job.name) is not job:
            why = f": {job.ended}" if job.ended else ""
            raise JobError(
                f"job {job.name!r} was deleted while rank(s) waited to join{why}", grpc.StatusCode.ABORTED
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

    def heartbeat(self, name: str, rank: int, caller: Caller) -> tuple[float, int]:
        """A sign of life of `rank`: (the lease, the job's generation)."""
        job = self.get(name, caller)
        self._check_member(job, rank)
        job.heartbeats[rank] = time.monotonic()
        return self.lease_seconds, job.generation

    async def leave(self, name: str, rank: int, caller: Caller, calls_begun: int = 0) -> None:
        """A rank is done: while waiting it may join again; once active, the last rank out deletes the job.
        `calls_begun` (0: unknown) is how many calls it had begun: its peers can finish those (their
        contributions are all in the switch), and no later one."""
        job = self.get(name, caller)
        self._check_member(job, rank)
        job.heartbeats.pop(rank, None)
        job.disconnected.pop(rank, None)
        if not job.installed:
            del job.workers[rank]
            log.info("job %r: rank %d left before the job started", name, rank)
            return
        if len(job.left) + 1 == job.world_size:
            await self._delete(job, f"job {job.name!r} ended: rank {rank} left and so has every other rank")
            return
        await self._remove_rank(job, rank)
        log.info("job %r: rank %d left; its entries are gone from the switch", name, rank)
        if len(job.left) < job.world_size:
            # The others cannot finish a later call without it: they hear it at once, with its name,
            # instead of timing out 10 s later.
            reason = f"rank {rank} left job {job.name!r}: its peers' calls cannot finish without it"
            event = JobEvent("rank_left", reason, job.generation, rank, calls_begun)
            job.departures[rank] = event  # a rank whose WatchJob opens later hears it too
            job.publish(event)
        if len(job.left) == job.world_size:
            # Ranks that left together each saw the others present when they began; the last
            # removal is what empties the job.
            await self._delete(job, f"job {job.name!r} ended: every rank has left")

    async def _remove_rank(self, job: Job, rank: int) -> None:
        """A departed rank's address and key are never trusted again: its entries go at once."""
        if job.parts:
            worker = job.workers[rank]
            part = job.parts[worker.switch]
            async with self._switches[part.switch].lock:
                if self._jobs.get(job.name) is not job or rank in job.left:
                    return
                job.left.add(rank)
                members = self.trees.members(job, part)
                await self._switches[part.switch].session.write(
                    [
                        self.job_table.rank_entry("-", job, worker, part),
                        self.result_dest.entry("-", job, worker, part),
                        self.groups.part_group("~", job, part, members),
                    ]
                )
            return
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
        """Reclaim what silent ranks hold, per rank (docs/controller.md, "Leases").

        A rank of an active job that has not heartbeaten for longer than the
        lease, or whose WatchJob stream closed `disconnect_grace` seconds ago
        without a sign of life since, ends the job: the others cannot finish a
        call without it, so the job is deleted at once and they hear which rank
        went silent. A silent rank of a job still waiting for ranks is only
        un-registered (it may join again); a waiting job whose every rank went
        silent is deleted. Ranks waiting inside JoinJob are alive. Runs one at
        a time: the lease task and the check after a closed stream may meet.
        """
        async with self._expiring:
            return await self._expire()

    async def _expire(self) -> list[str]:
        now, expired = time.monotonic(), []
        grace = self.disconnect_grace
        for job in list(self._jobs.values()):
            joining = self._joining.get(job.job_id, Counter())
            silent: dict[int, str] = {}
            for rank, seen in job.heartbeats.items():
                if rank in job.left or joining[rank]:
                    continue
                gone = job.disconnected.get(rank)
                if now - seen > self.lease_seconds:
                    silent[rank] = f"rank {rank} stopped heartbeating {now - seen:.1f} s ago"
                elif gone is not None and gone >= seen and now - gone >= grace:
                    silent[rank] = (
                        f"rank {rank}'s connection to the controller closed {now - gone:.1f} s ago and it "
                        "has not come back (did its process exit?)"
                    )
            if not silent:
                continue
            if job.installed:
                rank, why = next(iter(sorted(silent.items())))
                await self._delete(
                    job, f"job {job.name!r} was reclaimed: {why} (lease {self.lease_seconds:g} s)", rank
                )
                expired.append(job.name)
                continue
            for rank, why in silent.items():
                log.info("job %r: %s; un-registered (it may join again)", job.name, why)
                del job.workers[rank], job.heartbeats[rank]
            if not job.workers:
                await self._delete(job, f"job {job.name!r} was reclaimed: every rank that joined went silent")
                expired.append(job.name)
        return expired

    # ---- what the ranks hear -------------------------------------------------------------------

    async def watch(self, name: str, rank: int, caller: Caller) -> AsyncIterator[JobEvent]:
        """The job's events as they happen, starting with its current generation; ends with DELETED.

        The stream is also a sign of life: while it is open the rank's process
        is there, and when it closes without a LeaveJob the rank has
        `disconnect_grace` seconds to come back; expire() runs then, not at the
        lease task's next round (up to a second later).
        """
        job = self.get(name, caller)
        self._check_member(job, rank)
        queue: asyncio.Queue[JobEvent] = asyncio.Queue()
        job.watchers.add(queue)
        job.disconnected.pop(rank, None)
        try:
            yield JobEvent("watching", f"watching job {job.name!r}", job.generation)
            # Ranks that left before this stream opened (it opens after the join returns, and a peer may
            # leave at once): told now, or this rank's next call would wait for them until its timeout.
            for event in list(job.departures.values()):
                if event.rank != rank:
                    yield event
            while True:
                event = await queue.get()
                if event.kind == "closing":
                    return
                yield event
                if event.kind == "deleted":
                    return
        finally:
            job.watchers.discard(queue)
            if self._jobs.get(job.name) is job and rank not in job.left:
                job.disconnected[rank] = time.monotonic()
                self._check_after_grace()

    def _check_after_grace(self) -> None:
        """Run expire() once the grace of a stream that just closed has passed."""
        loop = asyncio.get_running_loop()

        def check() -> None:
            self._expiry_checks.discard(timer)
            task = loop.create_task(self.expire())
            self._expiry_checks.add(task)
            task.add_done_callback(self._checked)

        timer = loop.call_later(self.disconnect_grace + 0.01, check)  # the loop may run a timer early
        self._expiry_checks.add(timer)

    def _checked(self, task: asyncio.Task[list[str]]) -> None:
        self._expiry_checks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("lease check after a closed stream failed", exc_info=task.exception())

    def cancel_checks(self) -> None:
        """The daemon is stopping: no expiry check after this."""
        for check in list(self._expiry_checks):
            check.cancel()
        self._expiry_checks.clear()

    def close_watches(self) -> None:
        """The daemon is stopping: end every WatchJob stream (the ranks watch the next daemon)."""
        for job in self._jobs.values():
            job.publish(JobEvent("closing", "the controller is stopping", job.generation))

    def resume(
        self, name: str, rank: int, generation: int, calls_begun: int, caller: Caller
    ) -> tuple[bool, int, int, int, list[int]]:
        """A rank's report after the switch restarted: (ready, generation, its key, resume call, waiting).

        Every rank reports how many calls it had begun when it heard of the
        restart; the first report of a generation counts. Once every present
        rank has reported, the ranks go on together from the highest count:
        a call numbered below it that some rank had begun could not finish
        (its state went with the switch), so it fails everywhere, and the
        call numbered by it runs on the new generation's keys.
        """
        job = self.get(name, caller)
        self._check_member(job, rank)
        job.heartbeats[rank] = time.monotonic()
        if generation == job.generation:
            job.resumes.setdefault(rank, calls_begun)
        waiting = [w.rank for w in job.present() if w.rank not in job.resumes]
        resume_call = max(job.resumes.values(), default=0)
        return not waiting, job.generation, job.workers[rank].key, resume_call, waiting

    # ---- counters ------------------------------------------------------------------------------

    async def read_counters(self, caller: Caller, job_name: str = "", switch: str = "") -> list[CounterValue]:
        """A job's counters (on `switch`, else where its uses complete: its tree's root), or a switch's."""
        job = self.get(job_name, caller) if job_name else None
        state = self._switch(switch or (job.root if job else ""))
        here = state.config.name
        if job is not None and here not in job.held():
            raise JobError(f"job {job.name!r} has nothing on switch {here}", grpc.StatusCode.NOT_FOUND)
        names = {j.id_on(here): j.name for j in self._jobs.values() if here in j.held()}
        counts = await self.counters.job_counters(state.session, job.id_on(here) if job else None)
        values = []
        for counter, per_job in counts.items():
            for job_id, (packets, octets) in sorted(per_job.items()):
                if job or packets or job_id in names:
                    label = names.get(job_id, f"job-{job_id}")
                    values.append(CounterValue(counter, job_id, label, packets, octets))
        if job is None:
            values += await self.counters.drop_counters(state.session)
        return values

    async def snapshot(self) -> list[SwitchSnapshot]:
        """Every switch with its jobs and all their counters, as the operator sees them (metrics, top)."""
        out = []
        for name, state in self._switches.items():
            jobs = [j for j in self.jobs() if name in j.held()]
            try:
                counts = await self.counters.job_counters(state.session)
                drops = await self.counters.drop_counters(state.session)
                error = ""
            except ControllerError as exc:  # a switch being reconnected: its jobs are still shown
                counts, drops, error = {}, [], str(exc)
            out.append(SwitchSnapshot(name, state.facts.slot_count, state.allocator.free_slots(), jobs,
                                      counts, drops, error))  # fmt: skip
        return out

    # ---- recovery ------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild the jobs from the switches' tables; remove what half-finished writes left behind."""
        async with self._locked(set(self._switches)):
            reads = {name: await self._read_jobs(state.session) for name, state in self._switches.items()}
            away: dict[str, set[int]] = {name: set() for name in self._switches}  # tree parts off home
            for home, (by_job, _, _) in reads.items():
                for ranks in by_job.values():
                    record = ranks.get(RECORD_RANK)
                    parts = tree_parts(record.metadata, record_slots(record).size) if record else None
                    for part in (parts or {}).values():
                        if part.switch != home and part.switch in away:
                            away[part.switch].add(part.job_id)
            for name, state in self._switches.items():
                await self._recover_switch(state, reads[name], away[name])
            for job in [j for j in self._jobs.values() if j.parts]:
                await self._recover_tree(job, reads)
        log.info("recovered %d job(s)", len(self._jobs))

    async def _recover_tree(self, job: Job, reads: dict[str, _Read]) -> None:
        """A job whose record names a tree: active again if every part is whole on its switch, else
        cleared everywhere but its record (its ranks join again)."""
        now = time.monotonic()
        workers: dict[int, Worker] = {}
        whole = set(job.parts) <= set(self._switches)
        for part in job.parts.values() if whole else ():
            if part.switch != job.switch:
                state = self._switches[part.switch]
                try:
                    state.allocator.reserve(part.slots)
                    state.ids.claim(part.job_id)
                except JobError as exc:
                    log.error("job %r: its part on %s cannot be recovered: %s", job.name, part.switch, exc)
                    whole = False
                    continue
            by_job, dests, groups = reads[part.switch]
            rows = by_job.get(part.job_id, {})
            children = {c.up_rank for c in job.children(part.switch)}
            for rank, row in rows.items():
                dest = dests.get((part.job_id, rank))
                if rank in children or rank == RECORD_RANK or dest is None:
                    continue
                workers[rank] = Worker(
                    rank, row.sender_ip, row.sender_udp_port, dest.mac, row.sender_port, row.key, part.switch
                )
            expected = {r for r in rows if r != RECORD_RANK} == children | {
                r for r, w in workers.items() if w.switch == part.switch
            } and children <= set(rows)
            replicas = sorted(r for _, r in groups.get(part.group, []))
            whole = (
                whole and expected and bool(rows) and replicas == sorted(r for r in rows if r != RECORD_RANK)
            )
        if whole and workers:
            job.workers, job.installed = workers, True
            job.left = set(range(job.world_size)) - set(workers)
            job.heartbeats = dict.fromkeys(workers, now)
            log.info("recovered job %r as a tree rooted at %s", job.name, job.root)
            return
        log.warning("job %r: its tree is not whole on the switches; cleared (its ranks join again)", job.name)
        for part in job.parts.values():
            state = self._switches.get(part.switch)
            if state is None:
                continue
            with contextlib.suppress(JobError):
                if part.switch != job.switch:
                    state.allocator.release(part.slots)
                    state.ids.release(part.job_id)
            await self._clear_ids(state, {part.job_id}, keep_record=part.switch == job.switch)
        job.parts, job.workers, job.installed = {}, {}, False
        await self._switches[job.switch].session.write([self.job_table.record("~", job)])

    async def _recover_switch(self, state: SwitchState, read: _Read, away: set[int]) -> None:
        """Rebuild the jobs recorded on one switch; `away` are ids of other switches' trees' parts here."""
        session = state.session
        by_job, dests, groups = read
        protected = set(away)
        for job_id in await self.counters.used_job_ids(session):
            state.ids.rest(job_id)  # a past job's packets may still be about: not at once
        cleanup: list[Update] = []
        now = time.monotonic()
        for job_id, ranks in sorted(by_job.items()):
            if job_id in away:
                continue
            job = self._job_from_rows(state, job_id, ranks)
            if job is None:
                cleanup += [self.job_table.delete_key(job_id, r) for r in ranks]
                continue
            state.ids.claim(job_id)
            record = ranks.get(RECORD_RANK)
            parts = tree_parts(record.metadata, job.slots.size) if record else None
            if parts:  # recovered with the other switches' parts (_recover_tree)
                job.parts = parts
                protected.add(job_id)
                self._jobs[job.name] = job
                self._changed[job_id] = asyncio.Event()
                continue
            workers = _workers(job, ranks, dests)
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
        cleanup += [
            self.result_dest.delete_key(*key)
            for key in sorted(dests)
            if key not in live and key[0] not in protected
        ]
        live_groups = {j.group for j in self._jobs.values() if j.installed} | {
            job_group(j) for j in protected
        }
        cleanup += [self.groups.delete(g) for g in sorted(groups) if g not in live_groups]
        if cleanup:
            log.info("switch %s: removing %d stale entries", state.config.name, len(cleanup))
            await session.write(cleanup)

    async def _read_jobs(self, session: SwitchSession) -> _Read:
        """What the switch holds of jobs: job_table rows by job and rank, result_dest rows by (job, rank),
        the job groups' replicas."""
        by_job: dict[int, dict[int, JobRow]] = {}
        for row in await self.job_table.read(session):
            by_job.setdefault(row.job_id, {})[row.rank] = row
        dests = {(d.job_id, d.rank): d for d in await self.result_dest.read(session)}
        return by_job, dests, await self.groups.read(session)

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
        job = Job(name, job_id, state.config.name, record.num_workers, slots, record.mcast_grp, record.epoch)
        credential, generation = record.metadata.get("credential"), record.metadata.get("generation", 0)
        job.credential_hash = credential if isinstance(credential, str) else ""
        job.generation = generation if isinstance(generation, int) else 0
        tenant, placement = record.metadata.get("tenant", ""), record.metadata.get("placement", "")
        job.tenant = tenant if isinstance(tenant, str) else ""
        job.placement = placement if isinstance(placement, str) else ""
        if not job.credential_hash:
            log.warning("job %r has no credential (made by an older daemon): any client may act on it", name)
        return job

    # ---- after the switch restarted ------------------------------------------------------------

    async def attach(self, switch: str, session: SwitchSession) -> list[Job]:
        """Use `session` for `switch` from now on and make the switch hold every job again.

        Called when the daemon reconnected to a switch. A job whose entries are
        all there, with its epoch and keys, is left alone (only the connection
        broke). A job the switch lost, wholly or in part, is written again: an
        active one with a new epoch (clean slots), new keys (packets of its
        calls in flight are refused) and the next generation, and its ranks
        hear SWITCH_RESTARTED; a waiting one gets its record back. Entries of
        jobs the registry does not know are removed. Returns the restarted jobs.
        """
        state = self._switches[switch]
        restarted = []
        trees = [j for j in self.jobs() if j.parts and (switch in j.parts or j.switch == switch)]
        async with state.lock:
            state.session = session
            by_job, dests, groups = await self._read_jobs(session)
            removals: list[Update] = []
            installs: list[Update] = []
            tree_ids = {p.job_id for j in trees for p in j.parts.values() if p.switch == switch}
            tree_ids |= {j.job_id for j in trees if j.switch == switch}
            for job_id in tree_ids:  # healed below, with the rest of their trees
                by_job.pop(job_id, None)
            dests = {k: v for k, v in dests.items() if k[0] not in tree_ids}
            groups = {g: r for g, r in groups.items() if g not in {job_group(j) for j in tree_ids}}
            for job in self.jobs():
                if job.switch != switch or job.parts:
                    continue
                have = by_job.pop(job.job_id, {})
                if self._intact(job, have, dests, groups):
                    continue
                removals += [self.job_table.delete_key(job.job_id, r) for r in have]
                removals += [
                    self.result_dest.delete_key(job.job_id, r) for (j, r) in dests if j == job.job_id
                ]
                if job.group in groups:
                    removals.append(self.groups.delete(job.group))
                if job.installed:
                    self._renew(job)
                    restarted.append(job)
                installs += self._install_updates(job) if job.installed else [self.job_table.record("+", job)]
            for job_id, ranks in by_job.items():
                removals += [self.job_table.delete_key(job_id, r) for r in ranks]
            known = {j.job_id for j in self._jobs.values() if j.switch == switch}
            removals += [self.result_dest.delete_key(*k) for k in sorted(dests) if k[0] not in known]
            live_groups = {j.group for j in self._jobs.values() if j.switch == switch}
            removals += [self.groups.delete(g) for g in sorted(groups) if g not in live_groups]
            await session.write(removals)
            await session.write(installs)
        for job in trees:
            if await self._heal_tree(job, switch):
                restarted.append(job)
        for job in restarted:
            log.warning("job %r (id %d): the switch lost its state; reinstalled as generation %d",
                        job.name, job.job_id, job.generation)  # fmt: skip
            job.publish(
                JobEvent(
                    "switch_restarted",
                    f"switch {switch} restarted and lost the state of job {job.name!r}; the controller "
                    f"reinstalled it (generation {job.generation})",
                    job.generation,
                )
            )
        return restarted

    def _intact(
        self,
        job: Job,
        have: dict[int, JobRow],
        dests: dict[tuple[int, int], ResultDestRow],
        groups: dict[int, list[tuple[int, int]]],
    ) -> bool:
        """Whether the switch holds exactly the job's entries, with its epoch and keys."""
        record = have.get(RECORD_RANK)
        if record is None or record.epoch != job.epoch:
            return False
        if not job.installed:
            return set(have) == {RECORD_RANK}
        return _members_intact(job.home(), job.epoch, job.present(), have, dests, groups)

    async def _heal_tree(self, job: Job, switch: str) -> bool:
        """After `switch` restarted: if it lost any of a tree job's entries, reinstall the whole tree
        with a new epoch and keys (every rank's call in flight then fails, on every switch, and the
        next call is exact). True when it did."""
        async with self._locked({job.switch, *job.parts}):
            if self._jobs.get(job.name) is not job or not job.parts:
                return False
            state = self._switches[switch]
            if await self._tree_intact(job, switch, state.session):
                return False
            self._renew(job)
            job.parts = {
                s: dataclasses.replace(p, up_key=new_secret()) if p.parent else p
                for s, p in job.parts.items()
            }
            for part in reversed(self.trees.order(job)):
                await self._clear_ids(self._switches[part.switch], {part.job_id})
            if job.switch not in job.parts:
                await self._clear_ids(self._switches[job.switch], {job.job_id})
            for part in self.trees.order(job):
                for updates in self.trees.install(job, part):
                    await self._switches[part.switch].session.write(updates)
            await self._switches[job.switch].session.write([self.job_table.record("+", job)])
        return True

    async def _tree_intact(self, job: Job, switch: str, session: SwitchSession) -> bool:
        """Whether `switch` holds exactly its part of the job (at home, the record too), epoch and keys."""
        by_job, dests, groups = await self._read_jobs(session)
        if switch == job.switch:
            record = by_job.get(job.job_id, {}).get(RECORD_RANK)
            if record is None or record.epoch != job.epoch:
                return False
        part = job.parts.get(switch)
        if part is None:
            return True
        members = self.trees.members(job, part)
        return _members_intact(part, job.epoch, members, by_job.get(part.job_id, {}), dests, groups)

    @staticmethod
    def _renew(job: Job) -> None:
        """A new incarnation of an active job: new epoch and keys, the next generation, reports anew."""
        job.epoch = new_secret()
        job.generation += 1
        job.resumes = {}
        for rank, worker in list(job.workers.items()):
            if rank not in job.left:
                job.workers[rank] = dataclasses.replace(worker, key=new_secret())


def _no_room_or_down(exc: ControllerError) -> bool:
    """A switch that cannot take a job now (full, out of ids, unreachable), not a request that is wrong."""
    if isinstance(exc, QuotaExceeded):
        return False
    return isinstance(exc, SwitchError) or getattr(exc, "status", None) == grpc.StatusCode.RESOURCE_EXHAUSTED


def _members_intact(
    part: Part,
    epoch: int,
    members: list[Worker],
    have: dict[int, JobRow],
    dests: dict[tuple[int, int], ResultDestRow],
    groups: dict[int, list[tuple[int, int]]],
) -> bool:
    """Whether a switch holds exactly `members`' entries of the job's `part`, with `epoch` and their keys."""
    if {r for r in have if r != RECORD_RANK} != {m.rank for m in members}:
        return False
    for m in members:
        dest = dests.get((part.job_id, m.rank))
        if have[m.rank].key != m.key or have[m.rank].epoch != epoch or dest is None or dest.key != m.key:
            return False
    return sorted(groups.get(part.group, [])) == sorted((m.switch_port, m.rank) for m in members)


def _workers(
    job: Job, ranks: dict[int, JobRow], dests: dict[tuple[int, int], ResultDestRow]
) -> dict[int, Worker]:
    """The ranks whose job_table and result_dest entries are both on the switch."""
    workers = {}
    for rank in range(job.world_size):
        row, dest = ranks.get(rank), dests.get((job.job_id, rank))
        if row is not None and dest is not None:
            workers[rank] = Worker(
                rank, row.sender_ip, row.sender_udp_port, dest.mac, row.sender_port, row.key, job.switch
            )
    return workers
