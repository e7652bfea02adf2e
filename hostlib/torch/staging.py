"""Sums of device tensors through the switch: raw values staged through pinned host memory, piece by piece.

What crosses PCIe is the tensor's own values, not quantized blocks. The
switch agrees each chunk's exponent one use ahead (docs/protocol.md, *Host
rules*): a chunk's scale is known only when the previous result on its slot
has come back, so the device cannot quantize a tensor before the call, only
chunk by chunk as results arrive, a device round trip per packet. And the
raw values are never more bytes than the blocks (float32: 4 bytes either
way, plus an exponent per block for the blocks; float16 and bfloat16: 2
against 4, or 2 against 2 at the 16-bit wire format). So the host
library's engine quantizes on the host, where the exponents arrive, and
the device only copies.

The copies overlap the network: each collective is cut into pieces of
`PIECE_ELEMENTS`, all device-to-host copies are queued at once on a copy
stream that follows the caller's current stream (so piece i+1 is copied
while piece i is on the wire), a staging thread starts each piece's
all-reduce once its copy has landed and the piece before it has ended (the
host library runs one call at a time anyway), and each piece's result is
queued to the device on a second stream as soon as it is in. The caller's thread
never waits on the device: the call returns once the copies are queued.
`work.wait()` makes the caller's current stream wait for the last result's
copy (an event, as NCCL's works do); the calling thread waits for the
switch's last result to reach the host, which NCCL's wait() would not
(docs/torch.md, *CUDA*).

Every rank cuts a collective alike: the pieces before the last hold
exactly PIECE_ELEMENTS, the last more (or the whole collective when it is
no larger), so ranks whose collectives differ in size meet a piece of
another size and all raise AllreduceMismatch; the pieces after it start no
call on any rank, so the next collective works (the only case the cut
cannot tell apart: a collective of exactly PIECE_ELEMENTS against a larger
one, whose first piece it meets).

`CudaLanes` does the copies for CUDA tensors; `HostLanes` for tensors in
host memory, which the tests use to run the same pipeline without a GPU.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Protocol

import torch

from hostlib.communicator import Communicator, Handle
from hostlib.torch.arrays import call_keywords, host_array
from hostlib.torch.work import SwitchWork

__all__ = ["PIECE_ELEMENTS", "CudaLanes", "HostLanes", "StagedSums", "StagedWork", "piece_bounds"]

# 4 MB of float32 per piece: long enough on the wire to hide a copy, short enough to start soon. A
# multiple of every block (K = 32 .. 1024 values, 2K at 16 bits), so that pieces end on block boundaries
# and the sums are the CPU path's bit for bit; not a power of two, so that a collective of exactly this
# size (the cut's blind spot, above) is rare. A last piece (at most twice this) stays within one call
# of the host library: 2^24 - 1 elements and 65536 packets, 2,064,384 elements at K = 32 with the
# largest pool's priming.
PIECE_ELEMENTS = 504 * 2048


def piece_bounds(total: int, piece: int = PIECE_ELEMENTS) -> list[tuple[int, int]]:
    """[start, end) of each piece: all but the last exactly `piece` long, the last from piece + 1 to
    2 * piece long (or the whole collective, when it is at most `piece`)."""
    if total <= piece:
        return [(0, total)] if total else []
    cuts = list(range(0, total - piece, piece))  # the last start leaves more than `piece` behind it
    return [(start, min(start + piece, total)) for start in cuts[:-1]] + [(cuts[-1], total)]


class Lanes(Protocol):
    """The copies between a device and host memory that the pipeline needs, and their ordering."""

    device: torch.device

    def host_buffer(self, n: int, dtype: torch.dtype) -> torch.Tensor: ...

    def stage_out(
        self, flat: torch.Tensor, bounds: list[tuple[int, int]], target: torch.Tensor
    ) -> list[tuple[torch.Tensor, object]]: ...

    def reached(self, marker: object) -> None: ...

    def copy_in(self, target: torch.Tensor, host: torch.Tensor) -> None: ...

    def end(self) -> object: ...

    def caller_waits(self, marker: object) -> None: ...

    def completing(self) -> contextlib.AbstractContextManager[object]: ...


class HostLanes:
    """Lanes for tensors that are already in host memory: every copy is done when it returns."""

    device = torch.device("cpu")

    def host_buffer(self, n: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(n, dtype=dtype)

    def stage_out(
        self, flat: torch.Tensor, bounds: list[tuple[int, int]], target: torch.Tensor
    ) -> list[tuple[torch.Tensor, object]]:
        return [(flat[start:end].clone(), None) for start, end in bounds]

    def reached(self, marker: object) -> None:
        """Copies here end before stage_out returns."""

    def copy_in(self, target: torch.Tensor, host: torch.Tensor) -> None:
        target.copy_(host)

    def end(self) -> object:
        return None

    def caller_waits(self, marker: object) -> None:
        """No stream to order: the result is written when the work ends."""

    def completing(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()


class CudaLanes:
    """Two streams of one GPU: device-to-host copies on one, host-to-device on the other, both after
    the caller's stream at the call; events mark each piece's arrival on the host and the last result's
    on the device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._out = torch.cuda.Stream(device)
        self._in = torch.cuda.Stream(device)

    def host_buffer(self, n: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(n, dtype=dtype, pin_memory=True)  # DMA without the driver's bounce buffer

    def stage_out(
        self, flat: torch.Tensor, bounds: list[tuple[int, int]], target: torch.Tensor
    ) -> list[tuple[torch.Tensor, object]]:
        caller = torch.cuda.current_stream(self.device)
        self._out.wait_stream(caller)  # the values the caller's queued work produces
        self._in.wait_stream(caller)  # and the target's last use by it, before the results overwrite it
        flat.record_stream(self._out)  # the allocator keeps them until these streams are done with them
        target.record_stream(self._in)
        staged: list[tuple[torch.Tensor, object]] = []
        with torch.cuda.stream(self._out):
            for start, end in bounds:
                host = self.host_buffer(end - start, flat.dtype)
                host.copy_(flat[start:end], non_blocking=True)  # pinned: torch keeps it until copied
                landed = torch.cuda.Event()
                landed.record(self._out)
                staged.append((host, landed))
        return staged

    def reached(self, marker: object) -> None:
        marker.synchronize()  # type: ignore[attr-defined]  # releases the GIL while it waits

    def copy_in(self, target: torch.Tensor, host: torch.Tensor) -> None:
        with torch.cuda.stream(self._in):
            target.copy_(host, non_blocking=True)

    def end(self) -> object:
        done = torch.cuda.Event()
        done.record(self._in)
        return done

    def caller_waits(self, marker: object) -> None:
        torch.cuda.current_stream(self.device).wait_event(marker)  # type: ignore[arg-type]

    def completing(self) -> contextlib.AbstractContextManager[object]:
        """The stream the work's future records its event on: the results' stream."""
        return torch.cuda.stream(self._in)


class StagedWork(SwitchWork):
    """A SwitchWork whose wait() also orders the caller's stream after the results' copies."""

    def __init__(self, what: str, whole: Future[None], target: torch.Tensor, lanes: Lanes) -> None:
        devices = [lanes.device] if lanes.device.type == "cuda" else None
        self._lanes = lanes
        self.marker: object = None
        super().__init__(what, Handle(whole), lambda _: [target], devices)  # type: ignore[arg-type]

    def wait(self, timeout: timedelta | None = None) -> bool:
        super().wait(timeout)
        self._lanes.caller_waits(self.marker)
        return True

    def synchronize(self) -> None:
        """The caller's current stream waits for the results' copies (once the host has queued them)."""
        self.ended.wait()
        self._lanes.caller_waits(self.marker)


class _Pieces:
    """One staged collective's pieces on their way: counts them back and ends the work once."""

    def __init__(self, count: int, lanes: Lanes, whole: Future[None], epilogue: object) -> None:
        self._left = count
        self._lanes = lanes
        self._whole = whole
        self._epilogue = epilogue
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self.work: StagedWork | None = None

    def one_ended(self, error: BaseException | None = None) -> None:
        with self._lock:
            self._error = self._error or error
            self._left -= 1
            if self._left:
                return
        assert self.work is not None
        with self._lanes.completing():
            if self._error is None and callable(self._epilogue):
                self._epilogue()
            self.work.marker = self._lanes.end()
            if self._error is None:
                self._whole.set_result(None)
            else:
                self._whole.set_exception(self._error)


class StagedSums:
    """A group's sums of device tensors: one staging thread starts the pieces' all-reduces in call order."""

    def __init__(self, comm: Communicator, piece: int = PIECE_ELEMENTS, wire_bits: int = 16) -> None:
        """`wire_bits`: for float16 and bfloat16 pieces, as the group's setting (float32 and int32: 32)."""
        self._comm = comm
        self._piece = piece
        self._wire_bits = wire_bits
        self._stager = ThreadPoolExecutor(1, thread_name_prefix="p4reduce-staging")
        self._lanes: dict[torch.device, Lanes] = {}

    def lanes(self, device: torch.device) -> Lanes:
        if device not in self._lanes:
            self._lanes[device] = HostLanes() if device.type == "cpu" else CudaLanes(device)
        return self._lanes[device]

    def start(
        self, what: str, source: torch.Tensor, op: str, target: torch.Tensor, start: int = 0
    ) -> StagedWork:
        """Sum `source` over the ranks into `target`, which receives the elements [start, start + its size)
        of the sum (all_reduce: the source itself; reduce_scatter: this rank's part)."""
        lanes = self.lanes(source.device)
        flat = source.detach().reshape(-1)
        out = target.detach().view(-1) if target.is_contiguous() else torch.empty_like(target).view(-1)
        bounds = piece_bounds(flat.numel(), self._piece)
        staged = lanes.stage_out(flat, bounds, out)
        whole: Future[None] = Future()

        def epilogue() -> None:  # a strided target: the results went to a flat buffer first
            with torch.no_grad():
                target.copy_(out.view(target.shape))
            if target.is_cuda:
                target.record_stream(torch.cuda.current_stream(target.device))

        pieces = _Pieces(len(bounds), lanes, whole, None if out.data_ptr() == target.data_ptr() else epilogue)
        label = f"{what} of {source.numel()} × {str(source.dtype).removeprefix('torch.')} on {source.device}"
        work = pieces.work = StagedWork(label, whole, target, lanes)
        if not bounds:  # an empty tensor: no call, as the host library does
            whole.set_result(None)
            return work
        self._stager.submit(self._submit, pieces, staged, bounds, op, lanes, out, start)
        return work

    def _submit(
        self,
        pieces: _Pieces,
        staged: list[tuple[torch.Tensor, object]],
        bounds: list[tuple[int, int]],
        op: str,
        lanes: Lanes,
        out: torch.Tensor,
        start: int,
    ) -> None:
        """On the staging thread: each piece's all-reduce once its values have landed in host memory and
        the piece before it has ended (the host library runs one call at a time anyway). After a failure
        (which the switch makes every rank's: a mismatch aborts the call for all) the pieces left start
        no call, on every rank alike, so that the ranks' next calls have the same numbers."""
        in_flight: Handle | None = None
        failed = False
        for (begin, end), (host, landed) in zip(bounds, staged, strict=True):
            try:  # readied while the piece before is on the wire
                lanes.reached(landed)
                # numpy has no bfloat16: its bit patterns go as uint16, under a bfloat16 descriptor
                carried = host.view(torch.int16) if host.dtype == torch.bfloat16 else host
                result = lanes.host_buffer(end - begin, carried.dtype)
            except BaseException as error:  # the work must end, with this error, whatever it is
                failed = failed or self._ended(in_flight)
                pieces.one_ended(None if failed else error)
                failed, in_flight = True, None
                continue
            failed = failed or self._ended(in_flight)
            in_flight = None
            if failed:
                pieces.one_ended()  # skipped: the error is already the work's
                continue
            try:
                handle = self._comm.allreduce_async(
                    host_array(carried),
                    host_array(result),
                    op=op,  # type: ignore[arg-type]
                    **call_keywords(host.dtype, self._wire_bits),  # type: ignore[arg-type]
                )
            except BaseException as error:
                pieces.one_ended(error)
                failed = True
                continue
            handle.add_done_callback(
                lambda done, r=result, b=begin, e=end: self._returned(
                    done, pieces, lanes, r, b, e, out, start
                )
            )
            in_flight = handle
        # The last piece is not waited for: the next collective's first piece may queue behind it.

    @staticmethod
    def _ended(handle: Handle | None) -> bool:
        """Wait for a piece's call to end; True if it failed (its callback gives the work the error)."""
        if handle is None:
            return False
        try:
            handle.wait()
        except BaseException:
            return True
        return False

    @staticmethod
    def _returned(
        handle: Handle,
        pieces: _Pieces,
        lanes: Lanes,
        result: torch.Tensor,
        begin: int,
        end: int,
        out: torch.Tensor,
        start: int,
    ) -> None:
        """On the host library's thread: queue the part of this piece's sum that `out` keeps to the device."""
        try:
            handle.wait()
            low, high = max(begin, start), min(end, start + out.numel())
            if low < high:
                kept = result[low - begin : high - begin].view(out.dtype)  # bfloat16 came back as its bits
                lanes.copy_in(out[low - start : high - start], kept)
        except BaseException as error:
            pieces.one_ended(error)
        else:
            pieces.one_ended()

    def drain(self) -> None:
        """Return once every piece queued so far has been handed to the host library (its call order)."""
        self._stager.submit(lambda: None).result()

    def close(self) -> None:
        self._stager.shutdown(wait=True)
