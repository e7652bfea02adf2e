"""The subset of P4_16 + v1model the embedded switch runs: the one list the front end checks against.

A valid program that steps outside it is refused at compile time with
`unsupported: <construct>` at the construct's position, so nothing the
compiler accepts is refused later when the switch loads it. Every backend
implements exactly this subset (docs/softswitch.md, "Compatibility").
"""

from __future__ import annotations

# Extern object types that may be instantiated.
EXTERNS = frozenset({"counter", "direct_counter", "register", "meter", "direct_meter"})

# Extern functions that may be called (v1model and core); anything else declared is refused.
FUNCTIONS = frozenset(
    {
        "mark_to_drop",
        "verify_checksum",
        "update_checksum",
        "hash",
        "random",
        "log_msg",
        "assert",
        "assume",
        "static_assert",
        "resubmit_preserving_field_list",
        "recirculate_preserving_field_list",
        "clone",
        "clone_preserving_field_list",
        "digest",
    }
)

# The calls that take a @field_list index, and the position of that argument (an integer literal).
FIELD_LIST_CALLS = {
    "resubmit_preserving_field_list": 0,
    "recirculate_preserving_field_list": 0,
    "clone_preserving_field_list": 2,
}

# Calls that ask the traffic manager or the control plane for something at the end of ingress or
# egress; p4c's bmv2 backend refuses them in a parser, and so does this one.
CONTROL_ONLY_CALLS = frozenset({"clone", "digest", *FIELD_LIST_CALLS})

# The deprecated v1model calls whose field-list argument bmv2 implements through
# a data argument; named so that the refusal can say what to use instead.
DEPRECATED_FIELD_LIST_CALLS = {
    "clone3": "clone_preserving_field_list",
    "resubmit": "resubmit_preserving_field_list",
    "recirculate": "recirculate_preserving_field_list",
}

# HashAlgorithm members the executor computes (as bmv2 does).
HASH_ALGORITHMS = frozenset({"crc32", "crc16", "csum16", "identity", "xor16"})
CHECKSUM_ALGORITHMS = frozenset({"csum16"})

# Widths beyond these are refused rather than exhausting memory: real headers are far smaller.
MAX_WIDTH = 4096
MAX_STACK_SIZE = 256

# P4_16 reserved keywords that can never name a declaration (p4c's grammar lets apply, key,
# actions, state, entries, type, priority and list name things, so they are not here).
KEYWORDS = frozenset(
    {
        "abstract",
        "action",
        "bool",
        "bit",
        "break",
        "const",
        "continue",
        "control",
        "default",
        "else",
        "enum",
        "error",
        "exit",
        "extern",
        "false",
        "for",
        "header",
        "header_union",
        "if",
        "in",
        "inout",
        "int",
        "match_kind",
        "out",
        "package",
        "parser",
        "return",
        "select",
        "string",
        "struct",
        "switch",
        "table",
        "this",
        "transition",
        "true",
        "tuple",
        "typedef",
        "value_set",
        "varbit",
        "void",
    }
)

# The V1MODEL_VERSION values p4c knows (its first and its latest v1model.p4); others are an error there.
V1MODEL_VERSIONS = (20180101, 20200408)
