// bench/lib/bench_util.c — see bench_util.h.
#include "bench/lib/bench_util.h"

#include <assert.h>
#include <stdio.h>

#include "engine/stream.h"

int bench_preload(petrel_context *c)
{
    assert(c);
    pt_err err;
    if (pt_stream_preload(c, &err) == 0)
        return 0;
    fprintf(stderr, "preload: %s\n", err.msg);
    return -1;
}
