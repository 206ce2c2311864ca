// engine/state.h — what engine/state.c shares beyond the public state API
// (include/petrel.h): sealing a state blob's header, for the fuzzer.
#ifndef PETREL_ENGINE_STATE_H
#define PETREL_ENGINE_STATE_H

#include <stddef.h>

// Bytes of a state blob's header (st_header in engine/state.c).
#define PT_STATE_HEADER_BYTES 80

// Writes into buf's header the header hash that engine/state.c computes
// over the header's other fields, as petrel_state_save_mem does, so that a
// blob whose header fields were changed on purpose (fuzz/fuzz_state.c)
// passes the header check and reaches the payload decoder. Does nothing
// when len < PT_STATE_HEADER_BYTES.
void pt_state_seal_header(void *buf, size_t len);

#endif
