// The AVX-512 build of vector_math_kernels.h (compiled with -mavx512f/bw/vl/dq; called only when
// the CPU has them, see vector_math.cpp). The same loops as the SSE2 and AVX2 builds, with FP
// contraction off and a fixed association, so the results are bit-identical to theirs: the wider
// registers (and mask registers for the selects) change the speed only.
#if defined(__x86_64__)

#include "sampling/vector_math_kernels.h"

namespace strata::sampling::avx512 {

#include "sampling/vector_math_build.inc"

}  // namespace strata::sampling::avx512

#endif
