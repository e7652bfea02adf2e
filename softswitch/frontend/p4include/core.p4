/*
 * core.p4 for p4reduce-p4c: the declarations every P4_16 program gets from
 * the language specification (section "P4 core library"). Same names and
 * signatures as p4c's core.p4, so programs written for p4c compile unchanged.
 */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors the standard parser operations raise. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    void emit<T>(in T hdr);
}

extern void verify(in bool check, in error toSignal);

/* The action every table may fall back to. */
@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

/* Compile-time checks: true, or a compile error carrying `message`. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif /* _CORE_P4_ */
