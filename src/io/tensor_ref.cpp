#include "io/tensor_ref.h"

namespace strata::io {

std::string TensorRef::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace strata::io
