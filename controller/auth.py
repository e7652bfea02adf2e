"""Who may do what on the job API: the daemon's tokens and each job's credential.

Three secrets, each a bearer secret in gRPC metadata:

- the **access token** (`serve --token`): when set, every call must carry it
  (or the admin token) as `authorization: Bearer T`, else UNAUTHENTICATED.
  It lets a client create jobs and list them, nothing more: tenants may
  share it without being able to touch each other's jobs;
- the **admin token** (`serve --admin-token`): everything, on every job;
- a job's **credential** (`p4reduce-job-credential: C`): chosen by whoever
  creates the job (all of its ranks present the same one, so the first
  rank's JoinJob creates the job and the others join it), or drawn by the
  daemon and returned by CreateJob. JoinJob, Heartbeat, LeaveJob, WatchJob,
  ResumeJob, DeleteJob, GetJob and GetCounters of that job need it (or the
  admin token): without any, UNAUTHENTICATED; with another job's,
  PERMISSION_DENIED.

The daemon keeps only a SHA-256 of each credential (in memory and in the
job's table entries, so a restarted daemon still knows it); comparisons are
constant-time. Operator-wide reads (every job's workers, switch counters)
need the admin token when one is configured.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from contracts.jobapi_metadata import AUTHORIZATION, CREDENTIAL, CREDENTIAL_ENV
from controller.errors import JobError

MIN_CREDENTIAL = 16  # characters of a credential a creator chooses
MAX_CREDENTIAL = 256


def new_credential() -> str:
    return secrets.token_urlsafe(24)


def credential_hash(credential: str) -> str:
    return hashlib.sha256(credential.encode()).hexdigest()


def check_credential(credential: str) -> None:
    """A credential a creator chose must be a secret worth the name."""
    if not MIN_CREDENTIAL <= len(credential) <= MAX_CREDENTIAL or not credential.isprintable():
        raise JobError(
            f"a job credential must be {MIN_CREDENTIAL}..{MAX_CREDENTIAL} printable characters (this one "
            f"has {len(credential)}), e.g. python3 -c 'import secrets; print(secrets.token_urlsafe())'",
            grpc.StatusCode.INVALID_ARGUMENT,
        )


@dataclass(frozen=True)
class Caller:
    """What one call presented, and what the daemon's tokens make of it."""

    admin: bool
    credential: str  # the job credential presented ('' if none)
    peer: str  # the client's address, for the log and for "deleted by ..."
    tenant: str = ""  # the tenant whose token the call carried ('' if none: controller/quotas.py)

    def holds(self, job_hash: str) -> bool:
        """May this caller act on a job whose credential hashes to `job_hash`?"""
        return self.admin or (
            bool(self.credential) and hmac.compare_digest(credential_hash(self.credential), job_hash)
        )

    def require(self, job_hash: str, job: str) -> None:
        if self.holds(job_hash):
            return
        if not self.credential:
            raise JobError(
                f"job {job!r} needs its credential or the admin token: p4reduce-ctl --credential C, "
                f"Communicator.join(credential=C) or ${CREDENTIAL_ENV} (gRPC metadata {CREDENTIAL})",
                grpc.StatusCode.UNAUTHENTICATED,
            )
        raise JobError(
            f"the credential presented is not job {job!r}'s: each job has its own (or use the admin token)",
            grpc.StatusCode.PERMISSION_DENIED,
        )

    def describe(self) -> str:
        return f"{self.peer} ({'with the admin token' if self.admin else 'with the job credential'})"


@dataclass(frozen=True)
class Tokens:
    """The daemon's access and admin tokens ('' = not configured)."""

    access: str = ""
    admin: str = ""
    tenants: tuple[tuple[str, str], ...] = ()  # (tenant name, its token): each is an access token too

    def caller(self, metadata: Sequence[tuple[str, str | bytes]], peer: str) -> Caller:
        """The caller of a call with `metadata`; raises UNAUTHENTICATED when it lacks the access token."""
        values = {key: value for key, value in metadata if isinstance(value, str)}
        bearer = values.get(AUTHORIZATION, "")
        token = bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else ""
        admin = bool(self.admin) and hmac.compare_digest(token.encode(), self.admin.encode())
        matches = (
            name for name, secret in self.tenants if hmac.compare_digest(token.encode(), secret.encode())
        )
        tenant = next(matches, "")
        gated = bool(self.access or self.tenants)
        known = admin or tenant or (self.access and hmac.compare_digest(token.encode(), self.access.encode()))
        if gated and not known:
            raise JobError(
                "missing or wrong token (authorization: Bearer T)", grpc.StatusCode.UNAUTHENTICATED
            )
        return Caller(admin, values.get(CREDENTIAL, ""), peer, tenant)

    def operator(self, caller: Caller, what: str) -> None:
        """Operator-wide reads: the admin token when one is configured."""
        if self.admin and not caller.admin:
            raise JobError(f"{what} needs the admin token", grpc.StatusCode.PERMISSION_DENIED)
