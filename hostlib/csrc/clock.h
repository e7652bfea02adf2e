/* The one clock of the native code: CLOCK_MONOTONIC in seconds, as Python's time.perf_counter. */
#ifndef P4R_CLOCK_H
#define P4R_CLOCK_H

#include <time.h>

static inline double p4r_monotonic(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
