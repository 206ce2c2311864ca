// bench/lib/bench_util.h — helpers the benchmark drivers (bench/*.c) share.
#ifndef PETREL_BENCH_LIB_BENCH_UTIL_H
#define PETREL_BENCH_LIB_BENCH_UTIL_H

#include "petrel.h"

// Reads every expert of c's model into the cache (pt_stream_preload): the
// "everything resident" runs. 0, or -1 after printing "preload: WHY" to
// stderr.
int bench_preload(petrel_context *c);

#endif
