"""Tenants and their quotas: who may create jobs, and how many jobs and slots each may hold.

A tenant is a name with an access token of its own (config file, `tenants:`).
A job belongs to the tenant whose token created it, and remembers it on the
switch (the job's record entry, controller/tables/job_table.py), so a
restarted daemon counts the same jobs against the same quotas. A job that
would take its tenant past `max_jobs` (jobs on any switch) or past
`max_slots` (slots on the job's switch) is refused with one line naming the
quota, and nothing changes. With tenants configured, only a tenant's token
or the admin token may create jobs: the shared access token creates none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc

from controller.config import TenantConfig
from controller.errors import JobError, QuotaExceeded
from controller.job import Job


@dataclass(frozen=True)
class TenantUsage:
    tenant: TenantConfig
    jobs: int
    slots: dict[str, int]  # switch -> slots held there


class Quotas:
    def __init__(self, tenants: Sequence[TenantConfig]) -> None:
        self.tenants = {t.name: t for t in tenants}

    @property
    def enabled(self) -> bool:
        return bool(self.tenants)

    def check_creator(self, tenant: str, admin: bool) -> None:
        """With tenants configured, a job is created by a tenant (its token) or the operator."""
        if self.enabled and not tenant and not admin:
            raise JobError(
                "creating a job needs a tenant's token or the admin token (this daemon has tenants: "
                "controller config `tenants:`; the shared access token creates no jobs)",
                grpc.StatusCode.PERMISSION_DENIED,
            )

    def check(self, tenant: str, jobs: Iterable[Job], switch: str, slots: int) -> None:
        """Refuse a job of `slots` slots on `switch` that would take `tenant` past a quota."""
        quota = self.tenants.get(tenant)
        if quota is None:
            return
        mine = [j for j in jobs if j.tenant == tenant]
        if quota.max_jobs is not None and len(mine) + 1 > quota.max_jobs:
            raise QuotaExceeded(
                f"tenant {tenant!r} is at its quota of {quota.max_jobs} job(s) "
                f"(max_jobs; it holds {len(mine)})"
            )
        self.check_slots(tenant, mine, switch, slots)

    def check_slots(self, tenant: str, jobs: Iterable[Job], switch: str, slots: int) -> None:
        """Refuse `slots` more slots on `switch` (for a job or its tree's part) past the tenant's quota."""
        quota = self.tenants.get(tenant)
        if quota is None:
            return
        held = sum(j.held().get(switch, 0) for j in jobs if j.tenant == tenant)
        if quota.max_slots is not None and held + slots > quota.max_slots:
            raise QuotaExceeded(
                f"tenant {tenant!r} would hold {held + slots} slots on switch {switch}, past its quota of "
                f"{quota.max_slots} (max_slots; it holds {held} there)"
            )

    def usage(self, jobs: Iterable[Job]) -> list[TenantUsage]:
        """Every configured tenant's jobs and slots per switch, by name."""
        jobs = list(jobs)
        counts = Counter(j.tenant for j in jobs)
        out = []
        for name, tenant in sorted(self.tenants.items()):
            slots: Counter[str] = Counter()
            for job in jobs:
                if job.tenant == name:
                    slots.update(job.held())
            out.append(TenantUsage(tenant, counts[name], dict(sorted(slots.items()))))
        return out
