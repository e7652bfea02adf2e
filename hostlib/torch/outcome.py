"""`Outcome`: a torch future that ends with a value or with an error C++ callers see as one.

A Python `torch.futures.Future.set_exception` stores the exception as the
future's *value* and raises it only from Python's `wait()`; C++ callers
(DDP's reducer, which chains on collectives' and comm hooks' futures) take
that value for their tensors: a garbled error ("Unable to cast ... to
Tensor") or worse, a crash. A callback given to `then` that raises,
however, ends the future `then` returns with a real error. So the future
handed out is a `then` of a private one, whose callback returns the value
or raises the error.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import torch

T = TypeVar("T")

__all__ = ["Outcome"]


class Outcome(Generic[T]):
    def __init__(self, devices: list[torch.device] | None = None) -> None:
        # CUDA devices: the future records events on their current streams when it ends, and a waiter's
        # streams wait for them (torch's own CUDA-aware future), so results on a side stream are ordered.
        self._ending: torch.futures.Future[None] = torch.futures.Future(devices=devices or [])
        self._value: T | None = None
        self._error: BaseException | None = None
        self.future: torch.futures.Future[T] = self._ending.then(self._outcome)

    def succeed(self, value: T) -> None:
        self._value = value
        self._ending.set_result(None)

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._ending.set_result(None)

    def _outcome(self, _: torch.futures.Future[None]) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
