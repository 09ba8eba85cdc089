// A weight source that records every tensor a model asks for (name, shape, values), for tests
// that write checkpoints or check tensor names against a real checkpoint index.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/weight_source.h"

namespace strata::testing {

// Records every tensor a model asks a dummy source for (name, shape and the generated values).
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(std::unique_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  TensorNaming naming() const override { return inner_->naming(); }
  std::string describe() const override { return "recording"; }
  bool has(const std::string& name) const override { return inner_->has(name); }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, inner_->get(name, shape, init));
    std::vector<float> v(t.numel());
    dequantize_row(t.dtype, t.data, v.data(), t.numel());
    tensors[name] = {shape, v};
    return t;
  }
  struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  std::map<std::string, Tensor> tensors;

 private:
  std::unique_ptr<WeightSource> inner_;
};

}  // namespace strata::testing
