// tests/test_qt_quantize_portable.c — tests/test_qt_quantize.c again, with
// the quantisers' 8-lane searches built without their AVX2 clone (the code
// a machine without AVX2 runs: GCC's generic lowering of the vectors). This
// executable's own copy of kernels/qt_quantize_x8.c takes the place of the
// library's, so every quantiser here uses it.
#define QZ_PORTABLE_BUILD 1
#include "../kernels/qt_quantize_x8.c"
#include "test_qt_quantize.c"
