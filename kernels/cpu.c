// kernels/cpu.c — see cpu.h.
#include "kernels/cpu.h"

#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

pt_cpu_vendor pt_cpu_vendor_id(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return PT_CPU_OTHER;
    if (b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu) // "Genu" "ineI" "ntel"
        return PT_CPU_INTEL;
    if (b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u) // "Auth" "enti" "cAMD"
        return PT_CPU_AMD;
#endif
    return PT_CPU_OTHER;
}

unsigned pt_cpu_family(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d))
        return ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
#endif
    return 0;
}

int pt_env_switch(const char *name)
{
    const char *e = getenv(name);
    return e && (e[0] == '0' || e[0] == '1') ? e[0] - '0' : -1;
}

long pt_env_prefetch(const char *name, long dflt)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return dflt;
    const long v = strtol(e, NULL, 10);
    return v > 0 && v <= (1L << 20) ? v & ~63L : 0;
}
