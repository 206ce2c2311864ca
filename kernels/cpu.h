// kernels/cpu.h — what the kernels pick their code paths by, besides the
// ISA features (__builtin_cpu_supports): the vendor and family of the CPU,
// and the environment switches that force a choice either way (tests, A/B).
#ifndef PETREL_KERNELS_CPU_H
#define PETREL_KERNELS_CPU_H

typedef enum { PT_CPU_OTHER = 0, PT_CPU_INTEL, PT_CPU_AMD } pt_cpu_vendor;

// The CPUID vendor ("GenuineIntel", "AuthenticAMD"; anything else OTHER).
pt_cpu_vendor pt_cpu_vendor_id(void);

// The display family (base + extended: AMD Zen 3 / 4 are 0x19, Zen 5
// 0x1A; Intel's cores are 6); 0 where CPUID is not there.
unsigned pt_cpu_family(void);

// The environment variable `name` as a switch: "0..." -> 0, "1..." -> 1,
// unset or anything else -> -1 (the CPU decides).
int pt_env_switch(const char *name);

// The environment variable `name` as a prefetch distance in bytes: N in
// 1 .. 1 MiB rounded down to a multiple of 64, 0 for "0" or anything out
// of range (no prefetch); `dflt` (the CPU's choice) when unset or empty.
long pt_env_prefetch(const char *name, long dflt);

#endif
