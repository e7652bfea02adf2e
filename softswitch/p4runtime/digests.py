"""Digests: DigestEntry configuration, DigestList messages to the primary, DigestListAck, as PI does.

The data plane sends one message per `digest(receiver, data)` (the bytes
of each member, big-endian, whole bytes: runtime.pipeline.DIGEST_PORT_BASE).
Here, per P4Info digest, as PI's DigestMgr (simple_switch_grpc) does:

* nothing is delivered until a DigestEntry configures the digest (INSERT;
  MODIFY replaces the config; DELETE forgets the config, the cache and the
  lists not yet acknowledged; list ids go on counting);
* with `ack_timeout_ns` > 0 a sample that is already in the cache (sent or
  buffered, not yet acknowledged, not expired) is not sent again;
  a DigestListAck from the primary for a list removes that list's samples
  from the cache, and a list not acknowledged within `ack_timeout_ns`
  expires (its samples may be sent again); with 0 there is no cache;
* samples are gathered into one DigestList (list ids from 1, per digest),
  sent when it holds `max_list_size` samples (0: no limit) or, with
  `max_timeout_ns` 0, at once; otherwise when its first sample has waited
  `max_timeout_ns` (`sweep`, which the server calls periodically).

PI's own sweeps are coarser (they check every timeout period and act on
the second visit, at least 100 ms apart); this one acts on the first sweep
after the deadline. PI counts a list's size in cached samples only, so with
`ack_timeout_ns` 0 it never fills a list by size; here a list's size is its
number of samples. Only members of type bit<W>/int<W> are supported (PI
refuses any other digest type); the front end refuses the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from finsy.proto import p4d, p4i, p4r

from softswitch.p4info import digest_member_widths
from softswitch.p4runtime.codec import encode
from softswitch.p4runtime.errors import already_exists, invalid, not_found, unimplemented

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
Clock = Callable[[], int]  # nanoseconds


@dataclass
class _Sent:
    """A DigestList sent and not yet acknowledged: its cached samples and when it went."""

    samples: list[bytes]
    at: int


@dataclass
class _Digest:
    id: int
    name: str
    widths: tuple[int, ...]
    config: p4r.DigestEntry.Config | None = None
    cache: set[bytes] = field(default_factory=set)
    samples: list[bytes] = field(default_factory=list)  # of the list being gathered
    cached: list[bytes] = field(default_factory=list)  # those of them in the cache
    since: int = 0  # when the list being gathered got its first sample
    next_list_id: int = 1
    unacked: dict[int, _Sent] = field(default_factory=dict)

    def reset(self) -> None:
        self.config = None
        self.cache.clear()
        self.samples.clear()
        self.cached.clear()
        self.unacked.clear()


def _widths(info: p4i.P4Info, digest: p4i.Digest) -> tuple[int, ...]:
    """The member widths of a digest's struct; what PI refuses at pipeline push, with PI's codes."""
    try:
        return digest_member_widths(info, digest)
    except LookupError as error:
        raise invalid(str(error)) from None
    except TypeError as error:
        raise unimplemented(str(error)) from None


class Digests:
    """The digests of one pipeline; every method may be called from any thread."""

    def __init__(self, info: p4i.P4Info, clock: Clock = time.monotonic_ns) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._by_index: list[_Digest] = []
        for digest in info.digests:
            self._by_index.append(_Digest(digest.preamble.id, digest.preamble.name, _widths(info, digest)))
        self._by_id = {d.id: d for d in self._by_index}

    # ------------------------------------------------------------ configuration
    def write(self, kind: int, entry: p4r.DigestEntry) -> None:
        """INSERT, MODIFY or DELETE a digest's configuration; P4RuntimeError as PI answers."""
        with self._lock:
            digest = self._by_id.get(entry.digest_id)
            if digest is None:
                raise not_found(f"{entry.digest_id} is not a valid digest id")
            if kind == INSERT:
                if digest.config is not None:
                    raise already_exists(f"Digest {digest.id} already configured")
            elif digest.config is None:
                raise not_found(f"Digest {digest.id} not configured")
            if kind == DELETE:
                digest.reset()
                return
            config = entry.config
            if config.max_timeout_ns < 0 or config.ack_timeout_ns < 0 or config.max_list_size < 0:
                raise invalid(f"digest {digest.name}: timeouts and list size cannot be negative")
            digest.config = p4r.DigestEntry.Config()
            digest.config.CopyFrom(config)

    def read(self, entry: p4r.DigestEntry) -> Iterator[p4r.DigestEntry]:
        """The configured digests: the one named (NOT_FOUND when not configured), or all for id 0."""
        with self._lock:
            if entry.digest_id == 0:
                chosen = [d for d in self._by_index if d.config is not None]
            else:
                digest = self._by_id.get(entry.digest_id)
                if digest is None:
                    raise not_found(f"{entry.digest_id} is not a valid digest id")
                if digest.config is None:
                    raise not_found(f"Digest {digest.id} not configured")
                chosen = [digest]
            entries = [p4r.DigestEntry(digest_id=d.id, config=d.config) for d in chosen]
        yield from entries

    # ---------------------------------------------------------------- messages
    def learn(self, index: int, data: bytes) -> list[p4r.DigestList]:
        """One message from the data plane; the DigestLists to send now (none or one)."""
        with self._lock:
            if index >= len(self._by_index):
                return []
            digest = self._by_index[index]
            config = digest.config
            if config is None:
                return []
            if config.ack_timeout_ns > 0:
                if data in digest.cache:
                    return []
                digest.cache.add(data)
                digest.cached.append(data)
            if not digest.samples:
                digest.since = self._clock()
            digest.samples.append(data)
            full = config.max_list_size > 0 and len(digest.samples) >= config.max_list_size
            if full or config.max_timeout_ns == 0:
                return [self._send(digest)]
            return []

    def ack(self, digest_id: int, list_id: int) -> None:
        """The primary acknowledged a list: its samples may be sent again. Unknown ids are ignored (PI)."""
        with self._lock:
            digest = self._by_id.get(digest_id)
            sent = digest.unacked.pop(list_id, None) if digest is not None else None
            if digest is not None and sent is not None:
                digest.cache.difference_update(sent.samples)

    def sweep(self) -> list[p4r.DigestList]:
        """Expire lists not acknowledged in time; the gathered lists whose max_timeout_ns has passed."""
        now = self._clock()
        out = []
        with self._lock:
            for digest in self._by_index:
                config = digest.config
                if config is None:
                    continue
                if config.ack_timeout_ns > 0:
                    for list_id, sent in list(digest.unacked.items()):
                        if now - sent.at >= config.ack_timeout_ns:
                            del digest.unacked[list_id]
                            digest.cache.difference_update(sent.samples)
                if digest.samples and now - digest.since >= config.max_timeout_ns:
                    out.append(self._send(digest))
        return out

    def timed(self) -> bool:
        """Whether any configured digest has a timeout for `sweep` to watch."""
        with self._lock:
            return any(
                d.config is not None and (d.config.max_timeout_ns > 0 or d.config.ack_timeout_ns > 0)
                for d in self._by_index
            )

    def _send(self, digest: _Digest) -> p4r.DigestList:
        now = self._clock()
        message = p4r.DigestList(digest_id=digest.id, list_id=digest.next_list_id, timestamp=now)
        for sample in digest.samples:
            message.data.append(self._p4data(digest, sample))
        if digest.cached:
            digest.unacked[digest.next_list_id] = _Sent(list(digest.cached), now)
        digest.next_list_id += 1
        digest.samples.clear()
        digest.cached.clear()
        return message

    @staticmethod
    def _p4data(digest: _Digest, sample: bytes) -> p4d.P4Data:
        """A sample as a P4 struct of canonical bytestrings, one per member."""
        out = p4d.P4Data()
        members = out.struct.members
        at = 0
        for width in digest.widths:
            size = (width + 7) // 8
            members.add(bitstring=encode(int.from_bytes(sample[at : at + size], "big")))
            at += size
        return out
