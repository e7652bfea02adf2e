"""The controller's one P4Info reader: the file a compiler wrote, and the names the controller resolves.

p4c's bmv2 back end and p4reduce-p4c write the standard form: objects named
after their control (`MyIngress.job_table`), counters and registers as
P4Info `counters` and `registers`. The Tofino compiler (bf-p4c,
p4c-barefoot) writes its own form by default (docs/controller.md, *P4Info of the
Tofino compiler*):

- tables and extern instances are named after the `Pipeline` instance too
  (`pipe.MyIngress.job_table`; actions are not);
- counters and registers are `externs` of type `Counter` and `Register`, their
  details a `barefoot.Counter` / `barefoot.Register` message in an `Any`,
  and more extern types follow (`PortMetadata`, `Snapshot`).

A text P4Info spells such an `Any` out by field name, so reading it needs
the message types, which no installed package provides: `_BAREFOOT` below
declares the ones bf-p4c writes for a TNA program, with the field numbers of
its wire format (tests/test_tna_compile.py checks them against the
compiler's own binary P4Info wherever the compiler is installed). A binary
P4Info (`.bin`, what p4c writes for that suffix) needs none of them.

The switch is always given the P4Info as the compiler wrote it (its cookie
is of those bytes). The controller resolves its names in `controller_view`,
where the pipeline prefix is gone and the barefoot counters and registers
are ordinary ones with their own ids, so that every table module works
unchanged. `--p4runtime-force-std-externs` makes bf-p4c write the standard
form itself, which needs no view.
"""

from __future__ import annotations

from pathlib import Path

from finsy.proto import p4i, p4t
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, text_format
from google.protobuf.message import DecodeError, Message

from controller.errors import SwitchError
from controller.tables.p4names import EGRESS, INGRESS

BINARY_SUFFIXES = (".bin", ".binpb")  # p4c writes binary P4Info for `.bin`
BAREFOOT_URL = "type.googleapis.com/barefoot."

_F = descriptor_pb2.FieldDescriptorProto
_Fields = tuple[tuple[str, int, int, int, str], ...]  # (field, number, type, label, message/enum type)
# (message, fields): bf-p4c's wire format of the extern details it writes for a TNA program
_MESSAGES: tuple[tuple[str, _Fields], ...] = (
    ("CounterSpec", (("unit", 1, _F.TYPE_ENUM, _F.LABEL_OPTIONAL, ".barefoot.CounterSpec.Unit"),)),
    ("Counter", (
        ("spec", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".barefoot.CounterSpec"),
        ("size", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
    )),
    ("Register", (
        ("type_spec", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".p4.config.v1.P4DataTypeSpec"),
        ("size", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ("data_field_name", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
    )),
    ("PortMetadata", (
        ("key_name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("type_spec", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".p4.config.v1.P4DataTypeSpec"),
    )),
    ("Snapshot", (
        ("pipe", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("direction", 2, _F.TYPE_ENUM, _F.LABEL_OPTIONAL, ".barefoot.Direction"),
        ("fields", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".barefoot.Snapshot.Field"),
    )),
)  # fmt: skip
_SNAPSHOT_FIELD: _Fields = (
    ("id", 1, _F.TYPE_UINT32, _F.LABEL_OPTIONAL, ""),
    ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
    ("bitwidth", 3, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
)
# barefoot.CounterSpec.Unit, by number; the standard CounterSpec.Unit has the same numbers, BOTH for the last
_COUNTER_UNITS = ("UNSPECIFIED", "BYTES", "PACKETS", "PACKETS_AND_BYTES")


def _barefoot_pool() -> descriptor_pool.DescriptorPool:
    """A pool with P4Runtime's types and the barefoot messages above, apart from the default pool (so that
    nothing else in the process sees or clashes with them)."""
    pool = descriptor_pool.DescriptorPool()
    p4types = descriptor_pb2.FileDescriptorProto()
    p4t.DESCRIPTOR.CopyToProto(p4types)
    pool.Add(p4types)
    ours = descriptor_pb2.FileDescriptorProto(
        name="p4reduce/barefoot_p4info.proto", package="barefoot", syntax="proto3", dependency=[p4types.name]
    )
    _add_enum(ours.enum_type.add(name="Direction"), ("DIRECTION_INGRESS", "DIRECTION_EGRESS"))
    for name, fields in _MESSAGES:
        message = ours.message_type.add(name=name)
        _add_fields(message, fields)
        if name == "CounterSpec":
            _add_enum(message.enum_type.add(name="Unit"), _COUNTER_UNITS)
        if name == "Snapshot":
            _add_fields(message.nested_type.add(name="Field"), _SNAPSHOT_FIELD)
    pool.Add(ours)
    return pool


def _add_enum(enum: descriptor_pb2.EnumDescriptorProto, names: tuple[str, ...]) -> None:
    """Values numbered from 0 in the order given."""
    for number, name in enumerate(names):
        enum.value.add(name=name, number=number)


def _add_fields(message: descriptor_pb2.DescriptorProto, fields: _Fields) -> None:
    for field, number, kind, label, type_name in fields:
        added = message.field.add(name=field, number=number, type=kind, label=label)  # type: ignore[arg-type]
        if type_name:
            added.type_name = type_name


_BAREFOOT = _barefoot_pool()


def barefoot_message(name: str) -> Message:
    """An empty `barefoot.<name>` message (Counter, Register, PortMetadata, Snapshot, CounterSpec)."""
    return message_factory.GetMessageClass(_BAREFOOT.FindMessageTypeByName(f"barefoot.{name}"))()


def parse_p4info(text: str) -> p4i.P4Info:
    """A text (or JSON) P4Info, the barefoot extern messages above included."""
    info = p4i.P4Info()
    if text.lstrip().startswith("{"):
        json_format.Parse(text, info, descriptor_pool=_BAREFOOT)
    else:
        text_format.Parse(text, info, descriptor_pool=_BAREFOOT)
    return info


def read_p4info(path: Path) -> p4i.P4Info:
    """The P4Info file a compiler wrote: text, JSON, or binary for `.bin`/`.binpb`. SwitchError (one line)
    when it is none of these."""
    try:
        if path.suffix in BINARY_SUFFIXES:
            return p4i.P4Info.FromString(path.read_bytes())
        return parse_p4info(path.read_text("utf-8"))
    except OSError as exc:
        raise SwitchError(f"cannot read P4Info file {path}: {exc.strerror}") from None
    except (text_format.ParseError, json_format.ParseError, UnicodeDecodeError, DecodeError) as exc:
        reason = str(exc).splitlines()[0]
        hint = ""
        if "not found in descriptor pool" in reason:
            hint = (
                " (an extern type the controller cannot spell out; have the compiler write the P4Info in "
                "binary, `--p4runtime-files NAME.p4info.bin`, which the controller reads as it is)"
            )
        kind = "binary P4Info" if path.suffix in BINARY_SUFFIXES else "P4Info text protobuf"
        raise SwitchError(f"P4Info file {path} is not a {kind}: {reason}{hint}") from None


def pipeline_prefix(info: p4i.P4Info) -> str:
    """`pipe.` when the names carry the Pipeline instance's name before the controls (bf-p4c), else ''."""
    prefixes = set()
    for preamble in _preambles(info):
        parts = preamble.name.split(".")
        if len(parts) >= 3 and parts[1] in (INGRESS, EGRESS):
            prefixes.add(parts[0])
    if len(prefixes) > 1:
        raise SwitchError(
            f"the P4Info describes several pipelines ({', '.join(sorted(prefixes))}); the controller drives "
            "a program of one"
        )
    return f"{prefixes.pop()}." if prefixes else ""


def controller_view(info: p4i.P4Info) -> p4i.P4Info:
    """The P4Info as the controller resolves names in it: without the pipeline prefix, with barefoot
    `Counter` and `Register` externs as counters and registers (same ids); `info` itself for the
    standard form."""
    prefix = pipeline_prefix(info)
    if not prefix and not any(_converted(extern) for extern in info.externs):
        return info
    view = p4i.P4Info()
    view.CopyFrom(info)
    kept = []
    for extern in view.externs:
        if not _converted(extern):
            kept.append(extern)
            continue
        for instance in extern.instances:
            if extern.extern_type_name == "Counter":
                view.counters.append(_counter(instance))
            else:
                view.registers.append(_register(instance))
    del view.externs[:]
    view.externs.extend(kept)
    for preamble in _preambles(view):
        if preamble.name.startswith(prefix) and prefix:
            preamble.name = preamble.name[len(prefix) :]
    return view


def _counter(instance: p4i.ExternInstance) -> p4i.Counter:
    details = barefoot_message("Counter")
    instance.info.Unpack(details)
    unit = _COUNTER_UNITS[details.spec.unit]  # type: ignore[attr-defined]
    standard = p4i.CounterSpec.Unit.Value("BOTH" if unit == "PACKETS_AND_BYTES" else unit)
    return p4i.Counter(
        preamble=instance.preamble,
        spec=p4i.CounterSpec(unit=standard),  # type: ignore[arg-type]
        size=details.size,  # type: ignore[attr-defined]
    )


def _register(instance: p4i.ExternInstance) -> p4i.Register:
    details = barefoot_message("Register")
    instance.info.Unpack(details)
    type_spec = p4t.P4DataTypeSpec.FromString(details.type_spec.SerializeToString())  # type: ignore[attr-defined]
    return p4i.Register(preamble=instance.preamble, type_spec=type_spec, size=details.size)  # type: ignore[attr-defined]


def _converted(extern: p4i.Extern) -> bool:
    """A barefoot Counter or Register extern, which the view turns into a counter or register."""
    return extern.extern_type_name in ("Counter", "Register") and all(
        i.info.type_url == f"{BAREFOOT_URL}{extern.extern_type_name}" for i in extern.instances
    )


def _preambles(info: p4i.P4Info) -> list[p4i.Preamble]:
    groups = (
        info.tables, info.actions, info.action_profiles, info.counters, info.direct_counters, info.meters,
        info.direct_meters, info.controller_packet_metadata, info.value_sets, info.registers, info.digests,
    )  # fmt: skip
    found = [obj.preamble for group in groups for obj in group]
    found += [instance.preamble for extern in info.externs for instance in extern.instances]
    return found
