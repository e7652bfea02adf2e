"""The `p4reduce` torch.distributed backend: sums go through the switch, everything else through Gloo.

`P4ReduceProcessGroup` is a Python subclass of torch's `ProcessGroup`, so
that C++ callers (DDP's reducer, functional collectives) reach its Python
methods. It owns two things per group:

* a `Communicator` joined to a controller job of the group's ranks: all_reduce
  and reduce_scatter with SUM or AVG on CPU tensors of float32, float16,
  bfloat16 or int32 go through the switch (bfloat16 and float16 at 16 bits
  per value unless `wire_bits` says 32); CUDA tensors too, staged through
  host memory by hostlib/torch/staging.py;
* a Gloo backend on the same store, registered as the group's CPU backend:
  every other collective (broadcast, all_gather, barrier, send/recv, other
  ops and dtypes) is torch's own ProcessGroup dispatching to it, so DDP,
  FSDP and user code work unchanged.

Calls into the switch run in the order they are made, on one thread per
group, like Gloo's: every rank must make them in the same order.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo
from torch.distributed.distributed_c10d import _DistributedBackendOptions

from contracts.jobapi_metadata import CREDENTIAL_ENV
from hostlib.communicator import Communicator, JoinError
from hostlib.torch.arrays import call_keywords, host_array
from hostlib.torch.cuda_backend import cuda_backend
from hostlib.torch.options import ENV_STRICT, P4ReduceOptions, Settings, resolve
from hostlib.torch.registration import BACKEND
from hostlib.torch.staging import StagedSums
from hostlib.torch.work import SwitchWork, failed_work

__all__ = ["P4ReduceProcessGroup", "create_group"]

SWITCH_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)
SWITCH_DEVICES = ("cpu", "cuda")
_OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.AVG: "avg"}
_JOB_KEY = "p4reduce/job"
_CREDENTIAL_KEY = "p4reduce/credential"


class P4ReduceProcessGroup(dist.ProcessGroup):
    def __init__(
        self,
        store: dist.Store,
        rank: int,
        size: int,
        timeout: timedelta,
        options: P4ReduceOptions | None = None,
        group_id: str = "",
    ) -> None:
        super().__init__(rank, size)
        store = _this_attempt(store)
        self.options = options
        self.settings = resolve(options, timeout.total_seconds())
        self.collectives: Counter[tuple[str, str]] = Counter()  # (route, collective) -> calls
        self._last: SwitchWork | None = None
        self._gloo = ProcessGroupGloo(PrefixStore("p4reduce-gloo", store), rank, size, timeout)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._gloo)
        self._register_cuda(store, rank, size, timeout, group_id)
        job = _agree_job_name(store, rank, self.settings, group_id)
        self.credential = _agree_credential(store, rank)  # the job's, for its other API calls too
        self.comm: Communicator | None = None
        self.fallback = ""  # why every collective goes through Gloo ('' while the switch sums)
        failure = ""
        try:
            self.comm = Communicator.join(
                self.settings.controller,
                job,
                rank,
                size,
                address=(self.settings.address, 0),
                token=self.settings.token,
                credential=self.credential,
                join_timeout=self.settings.join_timeout,
                progress_timeout=self.settings.progress_timeout,
            )
        except (JoinError, OSError) as error:
            failure = f"rank {rank} could not join job {job!r} at {self.settings.controller}: {error}"
        # Every rank must take the same road, or the ones on the switch would wait for the others for ever.
        failure = _agree_outcome(store, rank, size, group_id, failure, timeout)
        if failure:
            if self.comm is not None:
                self.comm.close()
                self.comm = None
            if self.settings.strict:
                self._gloo.shutdown()
                raise dist.DistBackendError(f"p4reduce: {failure}") from None
            self.fallback = failure
            warnings.warn(
                f"p4reduce: every collective of this group goes through Gloo: {failure} "
                f"(set {ENV_STRICT}=1 to fail instead)",
                RuntimeWarning,
                stacklevel=2,
            )

    def _register_cuda(
        self, store: dist.Store, rank: int, size: int, timeout: timedelta, group_id: str
    ) -> None:
        """CUDA tensors: sums through the switch (staged through host memory), the rest to NCCL or Gloo."""
        self._staged: StagedSums | None = None
        choice, backend = cuda_backend(store, rank, size, timeout, group_id, self._gloo)
        self._cuda = backend if backend is not None else self._gloo
        if choice != "none":
            kind = (
                dist.ProcessGroup.BackendType.NCCL if choice == "nccl" else dist.ProcessGroup.BackendType.GLOO
            )
            self._register_backend(torch.device("cuda"), kind, self._cuda)

    def _other(self, tensors: Sequence[object]) -> dist.Backend:
        """The backend for collectives the switch does not compute: NCCL or Gloo for CUDA tensors."""
        return (
            self._cuda
            if any(isinstance(t, torch.Tensor) and t.is_cuda for t in _flat(tensors))
            else self._gloo
        )

    def getBackendName(self) -> str:  # noqa: N802 (torch's name for it)
        return BACKEND

    def name(self) -> str:
        return BACKEND

    @property
    def job(self) -> str:
        """The controller job this group's sums belong to (for GetCounters); '' after a fallback."""
        return self.comm.job.name if self.comm is not None else ""

    # ------------------------------------------------------------ through the switch
    def allreduce(
        self, tensors: list[torch.Tensor] | torch.Tensor, opts: dist.AllreduceOptions | None = None
    ) -> dist.Work:
        opts = opts if opts is not None else dist.AllreduceOptions()
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        op = _switch_op(tensors, opts.reduceOp) if self.comm is not None else None
        if op is None:
            return self._delegate("all_reduce", self._other(tensors).allreduce, tensors, opts)
        (tensor,) = tensors
        if tensor.device.type == "cpu" and tensor.is_contiguous():
            # In place, as Gloo sums: the host library writes the result into the tensor's own memory,
            # which no caller reads before the work ends; no result buffer to allocate and copy back.
            return self._switch("all_reduce", tensor, op, lambda _: [tensor], tensor, into=tensor)

        def finish(result: np.ndarray) -> list[torch.Tensor]:
            _write(tensor, result)
            return [tensor]

        return self._switch("all_reduce", tensor, op, finish, tensor)

    def reduce_scatter_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: dist.ReduceScatterOptions | None = None
    ) -> dist.Work:
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        op = self._scatter_op([output, input], opts.reduceOp)
        if op is None or input.numel() != output.numel() * self.size():
            scatter = self._other([output, input])._reduce_scatter_base
            return self._delegate("reduce_scatter", scatter, output, input, opts)
        n, start = output.numel(), output.numel() * self.rank()

        def finish(result: np.ndarray) -> list[torch.Tensor]:
            _write(output, result[start : start + n])
            return [output]

        return self._switch("reduce_scatter", input, op, finish, output, start)

    _reduce_scatter_base = reduce_scatter_single  # what torch called it before 2.13

    def reduce_scatter(
        self,
        output_tensors: list[torch.Tensor],
        input_tensors: list[list[torch.Tensor]],
        opts: dist.ReduceScatterOptions | None = None,
    ) -> dist.Work:
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        pieces = input_tensors[0] if len(input_tensors) == 1 else []
        op = self._scatter_op([*output_tensors, *pieces], opts.reduceOp)
        uniform = len(output_tensors) == 1 and len(pieces) == self.size()
        if op is None or not uniform or pieces[self.rank()].numel() != output_tensors[0].numel():
            scatter = self._other([output_tensors, input_tensors]).reduce_scatter
            return self._delegate("reduce_scatter", scatter, output_tensors, input_tensors, opts)
        (output,) = output_tensors
        start = sum(piece.numel() for piece in pieces[: self.rank()])
        joined = torch.cat([piece.reshape(-1) for piece in pieces])

        def finish(result: np.ndarray) -> list[torch.Tensor]:
            _write(output, result[start : start + output.numel()])
            return [output]

        return self._switch("reduce_scatter", joined, op, finish, output, start)

    def _scatter_op(self, tensors: Sequence[torch.Tensor], op: dist.ReduceOp) -> str | None:
        if self.settings.reduce_scatter != "switch" or self.comm is None:
            return None
        return _switch_op(tensors, op)

    def _delegate(self, what: str, call: Callable[..., dist.Work], *args: object) -> dist.Work:
        """Gloo computes it (it also explains arguments that are wrong for any backend)."""
        self.collectives["gloo", what] += 1
        return call(*args)

    def _switch(
        self,
        what: str,
        tensor: torch.Tensor,
        op: str,
        finish: Callable[[np.ndarray], list[torch.Tensor]],
        target: torch.Tensor,
        start: int = 0,
        into: torch.Tensor | None = None,
    ) -> dist.Work:
        """A CPU tensor's sum straight to the host library (written into `into`, a contiguous CPU tensor
        of its shape and dtype, where one is given); a device tensor's staged through host memory
        (hostlib/torch/staging.py) into `target`, which keeps elements [start, start + its size)."""
        if tensor.device.type == "cpu":
            if self._staged is not None:
                self._staged.drain()  # staged pieces queued before this call take their call numbers first
            return self._through_switch(what, tensor, op, finish, into)
        if self._staged is None:
            assert self.comm is not None, "only a group that joined its job sums through the switch"
            self._staged = StagedSums(self.comm, wire_bits=self.settings.wire_bits)
        self.collectives["switch", what] += 1
        self._last = self._staged.start(what, tensor, op, target, start)
        return self._last

    def _through_switch(
        self,
        what: str,
        tensor: torch.Tensor,
        op: str,
        finish: Callable[[np.ndarray], list[torch.Tensor]],
        into: torch.Tensor | None = None,
    ) -> dist.Work:
        """Start `tensor`'s sum (or average) through the switch, into `into`'s memory where given;
        `finish(result)` writes it back (or, with `into`, only names the outputs).

        Without `into` the result lands in a buffer of the communicator's scratch pool, handed back once
        `finish` has copied it out: a fresh result array per call would be fresh pages, which the kernel
        zeroes (docs/performance.md, *A bandwidth-bound DDP step*)."""
        flat = tensor.detach().reshape(-1)
        label = f"{what} of {tensor.numel()} × {str(tensor.dtype).removeprefix('torch.')}"
        self.collectives["switch", what] += 1
        comm = self.comm
        assert comm is not None, "only a group that joined its job sums through the switch"
        try:
            keywords = call_keywords(flat.dtype, self.settings.wire_bits)
            values = host_array(flat)
            if into is not None:
                out, ending = host_array(into.detach().view(-1)), finish
            else:
                out = comm.scratch.take(values.nbytes).view(values.dtype)

                def ending(result: np.ndarray) -> list[torch.Tensor]:
                    try:
                        return finish(result)
                    finally:
                        comm.scratch.give(out)

            # read in place: torch.distributed's callers leave a collective's tensor alone until it ends
            handle = comm.allreduce_async(values, out, op=op, copy=False, **keywords)  # type: ignore[arg-type]
        except Exception as error:
            return failed_work(label, error)
        self._last = SwitchWork(label, handle, ending)
        return self._last

    def flush(self) -> None:
        """Return once every sum started so far has ended (they end in order); their errors are theirs."""
        if self._last is not None:
            self._last.ended.wait()

    # ------------------------------------------------------------ ending
    def shutdown(self) -> None:
        """destroy_process_group: wait for queued sums, leave the job, close Gloo."""
        if self._staged is not None:
            self._staged.close()  # every piece handed to the host library, which ends them before closing
        if self.comm is not None:
            self.comm.close()
        if self._cuda is not self._gloo:
            self._cuda.shutdown()
        self._gloo.shutdown()

    def abort(self) -> None:
        self.shutdown()


# Collectives that are not sums go to Gloo straight from Python. Left to torch's C++ dispatch they would
# reach Gloo with the GIL held (torch 2.13's ProcessGroup trampoline keeps it), and Gloo's worker,
# which drops a finished work's tensors under the same mutex the caller then waits for, needs the GIL
# to release them: 300 rounds of all_gather + broadcast + barrier deadlocked 4 ranks. Gloo's own
# Python bindings release the GIL, so this path cannot.
_PASSED_TO_GLOO = (
    "barrier", "broadcast", "allgather", "_allgather_base", "allgather_coalesced",
    "allgather_into_tensor_coalesced", "gather", "scatter", "alltoall", "alltoall_base", "reduce",
    "send", "recv", "recv_anysource",
)  # fmt: skip


def _passed_to_gloo(name: str) -> Callable[..., dist.Work]:
    def collective(self: P4ReduceProcessGroup, *args: object, **kwargs: object) -> dist.Work:
        return getattr(self._other(args), name)(*args, **kwargs)

    collective.__name__ = collective.__qualname__ = name
    collective.__doc__ = (
        f"Gloo's {name} (NCCL's for CUDA tensors where chosen), called with the GIL released."
    )
    return collective


for _name in _PASSED_TO_GLOO:
    setattr(P4ReduceProcessGroup, _name, _passed_to_gloo(_name))


def _flat(items: Sequence[object]) -> list[object]:
    """The tensors (and other arguments) of a collective's arguments, lists of lists flattened."""
    out: list[object] = []
    for item in items:
        out.extend(_flat(item) if isinstance(item, (list, tuple)) else [item])
    return out


def _write(target: torch.Tensor, values: np.ndarray) -> None:
    """The switch's result into the caller's tensor (rounded to its dtype), as Gloo writes: not autograd's.
    A bfloat16 result comes as its bit patterns (uint16)."""
    result = torch.from_numpy(values)
    if values.dtype == np.uint16:
        result = result.view(torch.bfloat16)
    with torch.no_grad():
        target.copy_(result.view(target.shape))


def _switch_op(tensors: Sequence[torch.Tensor], op: dist.ReduceOp) -> str | None:
    """'sum' or 'avg' when the switch can compute this collective, None to delegate it."""
    name = next((value for key, value in _OPS.items() if op == key), None)
    if name is None or not tensors:
        return None
    dtype = tensors[0].dtype
    device = tensors[0].device
    if (
        dtype not in SWITCH_DTYPES
        or device.type not in SWITCH_DEVICES
        or any(t.dtype != dtype or t.device != device for t in tensors)
    ):
        return None
    return name


def _this_attempt(store: dist.Store) -> dist.Store:
    """The store, with this torchrun attempt's own keys. torchrun's agent keeps one store across the
    restarts of --max-restarts, so without a prefix a restarted group reads the dead attempt's keys:
    rank 0's old job name and credential, and the internal Gloo group's old peer addresses (its
    connectFullMesh then dials a dead process and init_process_group fails)."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
    return PrefixStore(f"p4reduce-attempt-{attempt}", store) if attempt else store


def _agree_outcome(
    store: dist.Store, rank: int, size: int, group_id: str, failure: str, timeout: timedelta
) -> str:
    """The first failure (by rank) of any rank's join, the same on every rank; '' when all joined."""
    prefix = f"p4reduce/joined/{group_id}/"
    store.set(f"{prefix}{rank}", failure or "ok")
    keys = [f"{prefix}{r}" for r in range(size)]
    store.wait(keys, timeout)
    outcomes = [store.get(key).decode() for key in keys]
    return next((o for o in outcomes if o != "ok"), "")


def _agree_job_name(store: dist.Store, rank: int, settings: Settings, group_id: str) -> str:
    """The controller job of this group: the one given (suffixed for groups other than the world),
    or one that rank 0 makes unique and hands the others through the store."""
    default_group = not dist.is_initialized()  # the world group is being created
    if settings.job is not None:
        return settings.job if default_group else _job_safe(f"{settings.job}.{group_id}")
    if rank == 0:
        master = os.environ.get("MASTER_ADDR", socket.gethostname().split(".")[0])[:24]
        port = os.environ.get("MASTER_PORT", "")[:5]
        group = "" if default_group else f"-g{group_id[:12]}"
        store.set(_JOB_KEY, _job_safe(f"torch-{master}-{port}{group}-{secrets.token_hex(4)}"))
    return store.get(_JOB_KEY).decode()


def _agree_credential(store: dist.Store, rank: int) -> str:
    """The job credential every rank of this group presents to the controller (docs/controller.md,
    "Authorization"): $P4REDUCE_JOB_CREDENTIAL when the user chose one, else a secret rank 0 draws and
    hands the others through torch's store, which only this job's processes share."""
    chosen = os.environ.get(CREDENTIAL_ENV, "")
    if chosen:
        return chosen
    if rank == 0:
        store.set(_CREDENTIAL_KEY, secrets.token_urlsafe(24))
    return store.get(_CREDENTIAL_KEY).decode()


def _job_safe(name: str) -> str:
    """A controller job name: letters, digits, '.', '_', '-', at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)[-64:].lstrip("._-") or "torch"


def create_group(options: _DistributedBackendOptions, backend_options: object) -> P4ReduceProcessGroup:
    """torch's hook (register_backend with extended_api): one group of `options.group_size` ranks.

    new_group() passes no options of its own: a subgroup takes those the world group was given.
    """
    if backend_options is None and dist.is_initialized():
        world = dist.group.WORLD
        backend_options = world.options if isinstance(world, P4ReduceProcessGroup) else None
    return P4ReduceProcessGroup(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout,
        backend_options,  # type: ignore[arg-type]
        str(options.group_id),
    )
