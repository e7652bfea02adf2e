"""Prometheus metrics of the controller daemon (`serve --metrics ADDR`): jobs and switches by name.

The values are read when Prometheus scrapes: the registry's jobs and slot
allocators, and every job and drop counter of the switches, read over
P4Runtime at that moment, so a metric equals what `p4reduce-ctl counters`
prints for the same job. The HTTP server is prometheus_client's, in a thread
of its own; the registry lives on the daemon's asyncio loop, so a scrape
runs `JobRegistry.snapshot()` on that loop and waits for it (at most
`SCRAPE_TIMEOUT`). A switch whose counters cannot be read is reported with
`p4reduce_switch_up 0` and its jobs without packet counts, never as zeros.

Names follow Prometheus habits: the `p4reduce_` prefix, `_total` on
counters, one family per P4 counter (`job_data_in` ->
`p4reduce_job_data_in_packets_total` and `..._bytes_total`). The switch
daemon's own families (ports, the packet loop) are softswitch/metrics.py's;
docs/controller.md lists both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.mastership import LinkStats
from controller.registry import JobRegistry, SwitchSnapshot
from controller.tables.counters import JOB_COUNTERS

log = logging.getLogger("controller.metrics")

SCRAPE_TIMEOUT = 5.0
JOB_LABELS = ["job_name", "switch"]  # not "job": Prometheus gives every target a `job` label of its own
JOB_STATES = ("waiting", "active")


def job_families(switches: list[SwitchSnapshot]) -> Iterator[Metric]:
    state = GaugeMetricFamily(
        "p4reduce_job_state", "1 for the job's current state (waiting for ranks, or active).",
        labels=[*JOB_LABELS, "state"],
    )  # fmt: skip
    gauges = {
        "world_size": GaugeMetricFamily("p4reduce_job_world_size", "Ranks the job was created for.",
                                        labels=JOB_LABELS),
        "ranks_joined": GaugeMetricFamily("p4reduce_job_ranks_joined", "Ranks that joined and have not left.",
                                          labels=JOB_LABELS),
        "slots": GaugeMetricFamily("p4reduce_job_slots", "Aggregator slots the job holds on its switch.",
                                   labels=JOB_LABELS),
        "generation": GaugeMetricFamily(
            "p4reduce_job_generation", "Times the switch lost the job's state and it was reinstalled.",
            labels=JOB_LABELS),
    }  # fmt: skip
    packets = {
        name: CounterMetricFamily(
            f"p4reduce_{name}_packets",
            f"Packets the switch counted in {name} for the job.",
            labels=JOB_LABELS,
        )
        for name in JOB_COUNTERS
    }
    octets = {
        name: CounterMetricFamily(
            f"p4reduce_{name}_bytes", f"Bytes counted in {name} for the job.", labels=JOB_LABELS
        )
        for name in JOB_COUNTERS
    }
    for switch in switches:
        for job in switch.jobs:
            labels = [job.name, switch.name]
            for name in JOB_STATES:
                state.add_metric([*labels, name], int(job.state == name))
            gauges["world_size"].add_metric(labels, job.world_size)
            gauges["ranks_joined"].add_metric(labels, len(job.present()))
            gauges["slots"].add_metric(labels, job.held()[switch.name])
            gauges["generation"].add_metric(labels, job.generation)
            if switch.error:
                continue
            for name in JOB_COUNTERS:
                count, size = switch.job_counters.get(name, {}).get(job.id_on(switch.name), (0, 0))
                packets[name].add_metric(labels, count)
                octets[name].add_metric(labels, size)
    yield state
    yield from gauges.values()
    for name in JOB_COUNTERS:
        yield packets[name]
        yield octets[name]


def switch_families(switches: list[SwitchSnapshot], links: Mapping[str, LinkStats]) -> Iterator[Metric]:
    labels = ["switch"]
    up = GaugeMetricFamily("p4reduce_switch_up", "1 when the daemon could read the switch's counters.",
                           labels=labels)  # fmt: skip
    slots = GaugeMetricFamily("p4reduce_switch_slots", "Aggregator slots of the switch's program.",
                              labels=labels)  # fmt: skip
    used = GaugeMetricFamily("p4reduce_switch_slots_used", "Slots held by jobs.", labels=labels)
    free = GaugeMetricFamily("p4reduce_switch_slots_free", "Slots no job holds.", labels=labels)
    jobs = GaugeMetricFamily("p4reduce_switch_jobs", "Jobs on the switch, waiting or active.", labels=labels)
    primary = GaugeMetricFamily(
        "p4reduce_switch_primary", "1 while the daemon is the switch's primary controller (it can write).",
        labels=labels,
    )  # fmt: skip
    link_counters = {
        "reconnects_total": CounterMetricFamily(
            "p4reduce_switch_reconnects", "Times the daemon reconnected to the switch after losing it.",
            labels=labels),
        "writes_total": CounterMetricFamily(
            "p4reduce_switch_p4runtime_writes", "P4Runtime Write batches the daemon sent the switch.",
            labels=labels),
        "write_errors_total": CounterMetricFamily(
            "p4reduce_switch_p4runtime_write_errors",
            "Write batches that failed: refused updates, a lost link, or not primary.", labels=labels),
        "mastership_lost_total": CounterMetricFamily(
            "p4reduce_switch_mastership_lost", "Times another controller (or nobody) became the primary.",
            labels=labels),
    }  # fmt: skip
    drop_labels = ["switch", "stage", "reason"]
    dropped = CounterMetricFamily(
        "p4reduce_switch_drops_packets", "Packets the program dropped, by stage and reason "
        "(per switch: a packet dropped for a bad key or an unknown job cannot be trusted to name a job).",
        labels=drop_labels,
    )  # fmt: skip
    dropped_bytes = CounterMetricFamily(
        "p4reduce_switch_drops_bytes", "Bytes of the packets the program dropped, by stage and reason.",
        labels=drop_labels,
    )  # fmt: skip
    for switch in switches:
        name = [switch.name]
        up.add_metric(name, int(not switch.error))
        slots.add_metric(name, switch.slots)
        used.add_metric(name, switch.slots - switch.free_slots)
        free.add_metric(name, switch.free_slots)
        jobs.add_metric(name, len(switch.jobs))
        link = links.get(switch.name)
        if link is not None:
            primary.add_metric(name, int(link.is_primary))
            for field, family in link_counters.items():
                family.add_metric(name, getattr(link, field))
        for drop in switch.drops:
            stage = drop.counter.removesuffix("_drops")
            dropped.add_metric([switch.name, stage, drop.label], drop.packets)
            dropped_bytes.add_metric([switch.name, stage, drop.label], drop.bytes)
    yield from (up, slots, used, free, jobs, primary, *link_counters.values(), dropped, dropped_bytes)


LinkSource = Callable[[], Mapping[str, LinkStats]]


def tenant_families(registry: JobRegistry, switches: list[SwitchSnapshot]) -> Iterator[Metric]:
    jobs = [job for switch in switches for job in switch.jobs]
    held = GaugeMetricFamily("p4reduce_tenant_jobs", "Jobs the tenant holds.", labels=["tenant"])
    limit = GaugeMetricFamily("p4reduce_tenant_max_jobs", "The tenant's job quota (absent: none).",
                              labels=["tenant"])  # fmt: skip
    slots = GaugeMetricFamily("p4reduce_tenant_slots", "Slots the tenant holds on a switch.",
                              labels=["tenant", "switch"])  # fmt: skip
    slot_limit = GaugeMetricFamily("p4reduce_tenant_max_slots", "The tenant's slot quota per switch.",
                                   labels=["tenant"])  # fmt: skip
    for usage in registry.quotas.usage(jobs):
        name = usage.tenant.name
        held.add_metric([name], usage.jobs)
        if usage.tenant.max_jobs is not None:
            limit.add_metric([name], usage.tenant.max_jobs)
        if usage.tenant.max_slots is not None:
            slot_limit.add_metric([name], usage.tenant.max_slots)
        for switch in switches:
            slots.add_metric([name, switch.name], usage.slots.get(switch.name, 0))
    yield from (held, limit, slots, slot_limit)


class ControllerCollector(Collector):
    """A scrape: the registry's snapshot, taken on the daemon's loop, as metric families."""

    def __init__(
        self,
        registry: JobRegistry,
        loop: asyncio.AbstractEventLoop,
        links: LinkSource,
    ) -> None:
        self.registry = registry
        self.loop = loop
        self.links = links

    def collect(self) -> Iterator[Metric]:
        future = asyncio.run_coroutine_threadsafe(self.registry.snapshot(), self.loop)
        switches = future.result(timeout=SCRAPE_TIMEOUT)
        yield from job_families(switches)
        yield from switch_families(switches, self.links())
        yield from tenant_families(self.registry, switches)


def serve_metrics(collector: ControllerCollector, host: str, port: int) -> WSGIServer:
    """Serve /metrics on host:port from prometheus_client's thread; OSError when it cannot listen."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _ = start_http_server(port, addr=host, registry=registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
    return server
