"""`SwitchWork`: torch's handle on a collective the switch is computing.

torch waits on collectives two ways: Python code calls `work.wait()`, C++
callers (DDP's reducer, functional collectives) chain on `work.get_future()`.
Both end when the host library's call has ended *and* its result has been
written into the caller's tensors; a failure is a `torch.distributed.DistBackendError`
whose message is p4reduce's own (AllreduceTimeout, AllreduceMismatch, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from hostlib.communicator import Handle
from hostlib.torch.outcome import Outcome

__all__ = ["SwitchWork", "failed_work"]


def backend_error(what: str, error: BaseException) -> dist.DistBackendError:
    """torch's error for a failed collective, p4reduce's message inside."""
    kind = type(error).__name__
    return dist.DistBackendError(f"p4reduce {what} failed: {kind}: {error}")


class SwitchWork(dist.Work):
    """Completes when `handle` has and `finish(result)` has written the result into the output tensors.

    Its future (an `Outcome`'s) ends with the output tensors, or with an error C++ callers see as one.
    """

    def __init__(
        self,
        what: str,
        handle: Handle,
        finish: Callable[[object], list[torch.Tensor]],
        devices: list[torch.device] | None = None,
    ) -> None:
        super().__init__()
        self._what = what
        self.ended = threading.Event()
        self._error: dist.DistBackendError | None = None
        self._outputs: list[torch.Tensor] = []
        self._outcome: Outcome[list[torch.Tensor]] = Outcome(devices)
        handle.add_done_callback(lambda done: self._end(done, finish))

    def _end(self, handle: Handle, finish: Callable[[object], list[torch.Tensor]]) -> None:
        """On the host library's thread: write the result back (or keep the error), then wake waiters."""
        try:
            self._outputs = finish(handle.wait())
        except BaseException as error:  # every failure must reach the waiters, none may hang them
            self._error = backend_error(self._what, error)
        self.ended.set()
        if self._error is None:
            self._outcome.succeed(self._outputs)
        else:
            self._outcome.fail(self._error)

    def wait(self, timeout: timedelta | None = None) -> bool:
        seconds = timeout.total_seconds() if timeout else None  # torch's "no timeout" is 0
        if not self.ended.wait(seconds):
            raise dist.DistBackendError(
                f"p4reduce {self._what} did not finish within {seconds:.1f} s of wait(); it goes on "
                "(the host library ends it with AllreduceTimeout if the switch stops answering)"
            )
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self.ended.is_set()

    def is_success(self) -> bool:
        return self.ended.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._outputs

    def synchronize(self) -> None:
        """CPU tensors: nothing to order against a stream."""

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        return self._outcome.future


class _DoneWork(dist.Work):
    """A collective that failed before it started: waiting raises its error."""

    def __init__(self, error: dist.DistBackendError) -> None:
        super().__init__()
        self._error = error
        self._outcome: Outcome[list[torch.Tensor]] = Outcome()
        self._outcome.fail(error)

    def wait(self, timeout: timedelta | None = None) -> bool:
        raise self._error

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return self._error

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        return self._outcome.future


def failed_work(what: str, error: BaseException) -> dist.Work:
    return _DoneWork(backend_error(what, error))
