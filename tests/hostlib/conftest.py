"""The hostlib tests' jobs share one credential, as a launcher hands one to every rank it starts."""

from __future__ import annotations

import pytest

from contracts.jobapi_metadata import CREDENTIAL_ENV


@pytest.fixture(autouse=True)
def job_credential(monkeypatch: pytest.MonkeyPatch) -> str:
    """$P4REDUCE_JOB_CREDENTIAL for Communicator.join in this process and the workers it spawns."""
    credential = "hostlib-tests-job-credential"
    monkeypatch.setenv(CREDENTIAL_ENV, credential)
    return credential
