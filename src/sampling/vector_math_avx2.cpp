// The AVX2 build of vector_math_kernels.h (compiled with -mavx2; called only when the CPU has
// it, see vector_math.cpp).
#if defined(__x86_64__)

#include "sampling/vector_math_kernels.h"

namespace strata::sampling::avx2 {

#include "sampling/vector_math_build.inc"

}  // namespace strata::sampling::avx2

#endif
