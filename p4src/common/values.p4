/*
 * P4R_FOR_EACH_VALUE(M) expands M(i) once per value of a p4reduce packet,
 * i = 00, 01, ... in hex (two digits), for the compile-time K =
 * VALUES_PER_PACKET. The programs use it for the values header's fields and
 * for the register operations on them, so that K is one -D away:
 *     p4c -DVALUES_PER_PACKET=128 ...
 */
#ifndef P4REDUCE_VALUES_P4
#define P4REDUCE_VALUES_P4

#include "constants.p4"

/* Sixteen values: r0 .. rf. */
#define P4R_ROW(M, r) M(r##0) M(r##1) M(r##2) M(r##3) M(r##4) M(r##5) M(r##6) M(r##7) \
                      M(r##8) M(r##9) M(r##a) M(r##b) M(r##c) M(r##d) M(r##e) M(r##f)
#define P4R_ROWS_32(M)  P4R_ROW(M, 0) P4R_ROW(M, 1)
#define P4R_ROWS_64(M)  P4R_ROWS_32(M) P4R_ROW(M, 2) P4R_ROW(M, 3)
#define P4R_ROWS_128(M) P4R_ROWS_64(M) P4R_ROW(M, 4) P4R_ROW(M, 5) P4R_ROW(M, 6) P4R_ROW(M, 7)
#define P4R_ROWS_256(M) P4R_ROWS_128(M) P4R_ROW(M, 8) P4R_ROW(M, 9) P4R_ROW(M, a) P4R_ROW(M, b) \
                        P4R_ROW(M, c) P4R_ROW(M, d) P4R_ROW(M, e) P4R_ROW(M, f)

#if VALUES_PER_PACKET == 32
#define P4R_FOR_EACH_VALUE(M) P4R_ROWS_32(M)
#elif VALUES_PER_PACKET == 64
#define P4R_FOR_EACH_VALUE(M) P4R_ROWS_64(M)
#elif VALUES_PER_PACKET == 128
#define P4R_FOR_EACH_VALUE(M) P4R_ROWS_128(M)
#elif VALUES_PER_PACKET == 256
#define P4R_FOR_EACH_VALUE(M) P4R_ROWS_256(M)
#else
#error "VALUES_PER_PACKET must be 32, 64, 128 or 256"
#endif

#endif /* P4REDUCE_VALUES_P4 */
