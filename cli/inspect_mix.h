// cli/inspect_mix.h — the type mix of a GGUF for `petrel inspect`: tensors
// and bytes per type (trunk vs routed experts), one expert's bytes per
// layer (mixed files differ by layer), and which tensors are row-length
// fallbacks. Works on the GGUF container alone (no model loading).
#ifndef PETREL_CLI_INSPECT_MIX_H
#define PETREL_CLI_INSPECT_MIX_H

#include <stdio.h>
#include "format/gguf.h"

// llama.cpp's base weight type of a general.file_type (LLAMA_FTYPE_*), the
// type llama-quantize --pure stores; -1 for an unknown or float ftype.
int pt_ftype_base_type(uint32_t ftype);

// "type mix:" (per type: tensors and bytes, all / trunk / experts) and
// "experts per layer:" (per MoE block: type and bytes of one expert's gate,
// up and down slices, and their sum).
void pt_inspect_print_mix(const gguf_file *g, FILE *f);

// "fallbacks:": Petrel's list (petrel.convert.fallbacks) in files Petrel
// wrote; in other files (llama-quantize's) the matrices whose row length is
// not whole blocks of the general.file_type's base type and which are stored
// in another type.
void pt_inspect_print_fallbacks(const gguf_file *g, FILE *f);

#endif
