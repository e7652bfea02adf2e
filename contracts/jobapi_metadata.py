"""The job API's metadata: how a call says who it is (docs/controller.md, "Who may do what").

`authorization: Bearer T` carries the daemon's access or admin token;
`p4reduce-job-credential: C` a job's own credential, which a launcher hands
to every rank of the job (hostlib reads it from P4REDUCE_JOB_CREDENTIAL
when the program does not pass one).
"""

AUTHORIZATION = "authorization"
CREDENTIAL = "p4reduce-job-credential"
CREDENTIAL_ENV = "P4REDUCE_JOB_CREDENTIAL"


def call_metadata(token: str = "", credential: str = "") -> list[tuple[str, str]]:
    """The metadata of a call presenting `token` and `credential` (either may be empty)."""
    metadata = [(AUTHORIZATION, f"Bearer {token}")] if token else []
    if credential:
        metadata.append((CREDENTIAL, credential))
    return metadata
