/*
 * P4R_FOR_EACH_VALUE(M) expands M(i) once per value of a p4reduce packet,
 * i = 00, 01, ... in hex (two digits), for the compile-time K =
 * VALUES_PER_PACKET. The programs use it for the values header's fields and
 * for the register operations on them, so that K is one -D away:
 *     p4c -DVALUES_PER_PACKET=128 ...
 * P4R_FOR_EACH_PAIR(M) expands M(i, j) once per pair of neighbouring values
 * (00, 01), (02, 03), ...: the TNA program keeps two values in one 64-bit
 * register cell, as SwitchML does.
 */
#ifndef P4REDUCE_VALUES_P4
#define P4REDUCE_VALUES_P4

#include "constants.p4"

/* Sixteen values r0 .. rf, one at a time or as eight pairs. */
#define P4R_ROW(M, r) M(r##0) M(r##1) M(r##2) M(r##3) M(r##4) M(r##5) M(r##6) M(r##7) \
                      M(r##8) M(r##9) M(r##a) M(r##b) M(r##c) M(r##d) M(r##e) M(r##f)
#define P4R_PAIR_ROW(M, r) M(r##0, r##1) M(r##2, r##3) M(r##4, r##5) M(r##6, r##7) \
                           M(r##8, r##9) M(r##a, r##b) M(r##c, r##d) M(r##e, r##f)

/* R(M, r) once per row r of sixteen values. */
#define P4R_ROWS_32(R, M)  R(M, 0) R(M, 1)
#define P4R_ROWS_64(R, M)  P4R_ROWS_32(R, M) R(M, 2) R(M, 3)
#define P4R_ROWS_128(R, M) P4R_ROWS_64(R, M) R(M, 4) R(M, 5) R(M, 6) R(M, 7)
#define P4R_ROWS_256(R, M) P4R_ROWS_128(R, M) R(M, 8) R(M, 9) R(M, a) R(M, b) \
                           R(M, c) R(M, d) R(M, e) R(M, f)
/* Beyond 256 values (software targets, jumbo frames) the index has three hex digits: rows 10 .. 3f. */
#define P4R_ROWS_1x(R, M, h) R(M, h##0) R(M, h##1) R(M, h##2) R(M, h##3) R(M, h##4) R(M, h##5) \
                             R(M, h##6) R(M, h##7) R(M, h##8) R(M, h##9) R(M, h##a) R(M, h##b) \
                             R(M, h##c) R(M, h##d) R(M, h##e) R(M, h##f)
#define P4R_ROWS_512(R, M)  P4R_ROWS_256(R, M) P4R_ROWS_1x(R, M, 1)
#define P4R_ROWS_1024(R, M) P4R_ROWS_512(R, M) P4R_ROWS_1x(R, M, 2) P4R_ROWS_1x(R, M, 3)

#if VALUES_PER_PACKET == 32
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_32(R, M)
#elif VALUES_PER_PACKET == 64
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_64(R, M)
#elif VALUES_PER_PACKET == 128
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_128(R, M)
#elif VALUES_PER_PACKET == 256
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_256(R, M)
#elif VALUES_PER_PACKET == 512
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_512(R, M)
#elif VALUES_PER_PACKET == 1024
#define P4R_FOR_EACH_ROW(R, M) P4R_ROWS_1024(R, M)
#else
#error "VALUES_PER_PACKET must be 32, 64, 128, 256, 512 or 1024"
#endif

#define P4R_FOR_EACH_VALUE(M) P4R_FOR_EACH_ROW(P4R_ROW, M)
#define P4R_FOR_EACH_PAIR(M) P4R_FOR_EACH_ROW(P4R_PAIR_ROW, M)

#endif /* P4REDUCE_VALUES_P4 */
