from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerAddress(_message.Message):
    __slots__ = ("ipv4", "udp_port", "mac", "switch_port")
    IPV4_FIELD_NUMBER: _ClassVar[int]
    UDP_PORT_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    SWITCH_PORT_FIELD_NUMBER: _ClassVar[int]
    ipv4: str
    udp_port: int
    mac: str
    switch_port: int
    def __init__(self, ipv4: _Optional[str] = ..., udp_port: _Optional[int] = ..., mac: _Optional[str] = ..., switch_port: _Optional[int] = ...) -> None: ...

class JobDescription(_message.Message):
    __slots__ = ("name", "job_id", "world_size", "base_slot", "pool_size", "values_per_packet", "switch_ipv4", "switch_udp_port", "multicast_group", "switch_name", "workers", "state", "lease_seconds", "key", "protocol_version", "credential", "generation", "ranks_joined", "tenant", "tree", "placement")
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    BASE_SLOT_FIELD_NUMBER: _ClassVar[int]
    POOL_SIZE_FIELD_NUMBER: _ClassVar[int]
    VALUES_PER_PACKET_FIELD_NUMBER: _ClassVar[int]
    SWITCH_IPV4_FIELD_NUMBER: _ClassVar[int]
    SWITCH_UDP_PORT_FIELD_NUMBER: _ClassVar[int]
    MULTICAST_GROUP_FIELD_NUMBER: _ClassVar[int]
    SWITCH_NAME_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RANKS_JOINED_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TREE_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    job_id: int
    world_size: int
    base_slot: int
    pool_size: int
    values_per_packet: int
    switch_ipv4: str
    switch_udp_port: int
    multicast_group: int
    switch_name: str
    workers: _containers.RepeatedCompositeFieldContainer[WorkerAddress]
    state: str
    lease_seconds: float
    key: int
    protocol_version: int
    credential: str
    generation: int
    ranks_joined: int
    tenant: str
    tree: _containers.RepeatedCompositeFieldContainer[TreePart]
    placement: str
    def __init__(self, name: _Optional[str] = ..., job_id: _Optional[int] = ..., world_size: _Optional[int] = ..., base_slot: _Optional[int] = ..., pool_size: _Optional[int] = ..., values_per_packet: _Optional[int] = ..., switch_ipv4: _Optional[str] = ..., switch_udp_port: _Optional[int] = ..., multicast_group: _Optional[int] = ..., switch_name: _Optional[str] = ..., workers: _Optional[_Iterable[_Union[WorkerAddress, _Mapping]]] = ..., state: _Optional[str] = ..., lease_seconds: _Optional[float] = ..., key: _Optional[int] = ..., protocol_version: _Optional[int] = ..., credential: _Optional[str] = ..., generation: _Optional[int] = ..., ranks_joined: _Optional[int] = ..., tenant: _Optional[str] = ..., tree: _Optional[_Iterable[_Union[TreePart, _Mapping]]] = ..., placement: _Optional[str] = ...) -> None: ...

class TreePart(_message.Message):
    __slots__ = ("switch_name", "parent", "job_id", "base_slot", "pool_size", "multicast_group", "uplink_port", "parent_port", "rank_in_parent", "ranks")
    SWITCH_NAME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_SLOT_FIELD_NUMBER: _ClassVar[int]
    POOL_SIZE_FIELD_NUMBER: _ClassVar[int]
    MULTICAST_GROUP_FIELD_NUMBER: _ClassVar[int]
    UPLINK_PORT_FIELD_NUMBER: _ClassVar[int]
    PARENT_PORT_FIELD_NUMBER: _ClassVar[int]
    RANK_IN_PARENT_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    switch_name: str
    parent: str
    job_id: int
    base_slot: int
    pool_size: int
    multicast_group: int
    uplink_port: int
    parent_port: int
    rank_in_parent: int
    ranks: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, switch_name: _Optional[str] = ..., parent: _Optional[str] = ..., job_id: _Optional[int] = ..., base_slot: _Optional[int] = ..., pool_size: _Optional[int] = ..., multicast_group: _Optional[int] = ..., uplink_port: _Optional[int] = ..., parent_port: _Optional[int] = ..., rank_in_parent: _Optional[int] = ..., ranks: _Optional[_Iterable[int]] = ...) -> None: ...

class CreateJobRequest(_message.Message):
    __slots__ = ("name", "world_size", "pool_size", "switch_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    POOL_SIZE_FIELD_NUMBER: _ClassVar[int]
    SWITCH_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    world_size: int
    pool_size: int
    switch_name: str
    def __init__(self, name: _Optional[str] = ..., world_size: _Optional[int] = ..., pool_size: _Optional[int] = ..., switch_name: _Optional[str] = ...) -> None: ...

class JoinJobRequest(_message.Message):
    __slots__ = ("name", "rank", "world_size", "address", "timeout_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    world_size: int
    address: WorkerAddress
    timeout_seconds: float
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., address: _Optional[_Union[WorkerAddress, _Mapping]] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class JobRef(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "rank")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("lease_seconds", "generation")
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    lease_seconds: float
    generation: int
    def __init__(self, lease_seconds: _Optional[float] = ..., generation: _Optional[int] = ...) -> None: ...

class LeaveJobRequest(_message.Message):
    __slots__ = ("name", "rank", "calls_begun")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    CALLS_BEGUN_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    calls_begun: int
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ..., calls_begun: _Optional[int] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobsReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobDescription]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobDescription, _Mapping]]] = ...) -> None: ...

class CounterValue(_message.Message):
    __slots__ = ("counter", "index", "label", "packets", "bytes")
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    counter: str
    index: int
    label: str
    packets: int
    bytes: int
    def __init__(self, counter: _Optional[str] = ..., index: _Optional[int] = ..., label: _Optional[str] = ..., packets: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class GetCountersRequest(_message.Message):
    __slots__ = ("job", "switch_name")
    JOB_FIELD_NUMBER: _ClassVar[int]
    SWITCH_NAME_FIELD_NUMBER: _ClassVar[int]
    job: str
    switch_name: str
    def __init__(self, job: _Optional[str] = ..., switch_name: _Optional[str] = ...) -> None: ...

class GetCountersReply(_message.Message):
    __slots__ = ("counters",)
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    counters: _containers.RepeatedCompositeFieldContainer[CounterValue]
    def __init__(self, counters: _Optional[_Iterable[_Union[CounterValue, _Mapping]]] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("name", "rank")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("kind", "message", "generation", "rank", "calls_begun")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        WATCHING: _ClassVar[JobEvent.Kind]
        DELETED: _ClassVar[JobEvent.Kind]
        SWITCH_RESTARTED: _ClassVar[JobEvent.Kind]
        RANK_LEFT: _ClassVar[JobEvent.Kind]
    WATCHING: JobEvent.Kind
    DELETED: JobEvent.Kind
    SWITCH_RESTARTED: JobEvent.Kind
    RANK_LEFT: JobEvent.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    CALLS_BEGUN_FIELD_NUMBER: _ClassVar[int]
    kind: JobEvent.Kind
    message: str
    generation: int
    rank: int
    calls_begun: int
    def __init__(self, kind: _Optional[_Union[JobEvent.Kind, str]] = ..., message: _Optional[str] = ..., generation: _Optional[int] = ..., rank: _Optional[int] = ..., calls_begun: _Optional[int] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("name", "rank", "generation", "calls_begun")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CALLS_BEGUN_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    generation: int
    calls_begun: int
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ..., generation: _Optional[int] = ..., calls_begun: _Optional[int] = ...) -> None: ...

class ResumeJobReply(_message.Message):
    __slots__ = ("ready", "generation", "key", "resume_call", "waiting_for")
    READY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RESUME_CALL_FIELD_NUMBER: _ClassVar[int]
    WAITING_FOR_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    generation: int
    key: int
    resume_call: int
    waiting_for: str
    def __init__(self, ready: bool = ..., generation: _Optional[int] = ..., key: _Optional[int] = ..., resume_call: _Optional[int] = ..., waiting_for: _Optional[str] = ...) -> None: ...

class SwitchSlots(_message.Message):
    __slots__ = ("switch_name", "slots")
    SWITCH_NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    switch_name: str
    slots: int
    def __init__(self, switch_name: _Optional[str] = ..., slots: _Optional[int] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ("name", "jobs", "max_jobs", "max_slots", "slots", "limited_jobs", "limited_slots")
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    LIMITED_JOBS_FIELD_NUMBER: _ClassVar[int]
    LIMITED_SLOTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    jobs: int
    max_jobs: int
    max_slots: int
    slots: _containers.RepeatedCompositeFieldContainer[SwitchSlots]
    limited_jobs: bool
    limited_slots: bool
    def __init__(self, name: _Optional[str] = ..., jobs: _Optional[int] = ..., max_jobs: _Optional[int] = ..., max_slots: _Optional[int] = ..., slots: _Optional[_Iterable[_Union[SwitchSlots, _Mapping]]] = ..., limited_jobs: bool = ..., limited_slots: bool = ...) -> None: ...

class ListTenantsReply(_message.Message):
    __slots__ = ("tenants",)
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[TenantUsage]
    def __init__(self, tenants: _Optional[_Iterable[_Union[TenantUsage, _Mapping]]] = ...) -> None: ...
