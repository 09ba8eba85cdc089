// Where a model's tensors come from: a safetensors checkpoint (HF names), a GGUF file (GGUF
// names), or random dummy weights (--load-format dummy) generated with the requested shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/tensor_ref.h"
#include "model/int_quant.h"

namespace strata {

enum class TensorNaming { kHuggingFace, kGguf };

// How a dummy tensor is initialised.
enum class DummyInit { kNormal, kOnes, kZeros };

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual TensorNaming naming() const = 0;
  virtual std::string describe() const = 0;
  virtual bool has(const std::string& name) const = 0;
  // Called once a tensor's bytes were converted or copied elsewhere: a file-backed source may drop
  // its pages from memory (they are read again if the tensor is asked for later).
  virtual void release(const io::TensorRef&) {}
  // The tensor `name`, checked against `shape` (PyTorch order). Errors name the source, the
  // tensor and both shapes. Dummy sources generate it (deterministically from the name).
  virtual Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                                    DummyInit init = DummyInit::kNormal) = 0;
  // Rows [begin, end) of the tensor (its outermost dimension), the whole tensor checked against
  // `shape` as get() checks it: what a tensor-parallel rank loads of a sharded weight. The view
  // has shape [end - begin, shape[1:]...]. File sources return a view of the mapping (a row range
  // is contiguous; block-quantized rows are whole blocks); dummy sources generate exactly the
  // values the whole tensor has at those rows, and only those. Errors for a range outside the
  // tensor or rows that do not start on a block of the tensor's dtype.
  virtual Result<io::TensorRef> get_rows(const std::string& name, const std::vector<int64_t>& shape,
                                         int64_t begin, int64_t end,
                                         DummyInit init = DummyInit::kNormal);
  // The tensor's name, dtype and shape, checked against `shape` as get() checks it, without
  // generating or reading its values (`data` may be null): what memory estimates read. File
  // sources return get()'s view of the mapping, which reads nothing.
  virtual Result<io::TensorRef> peek(const std::string& name, const std::vector<int64_t>& shape) {
    return get(name, shape);
  }
  // Drops buffers of generated tensors once the model has packed them.
  virtual void release_generated() {}

  // AWQ/GPTQ checkpoints (model/int_quant.h): how their quantized layers are stored. Set by the
  // loader from config.json; null for every other checkpoint.
  const IntQuantization* int_quant() const { return int_quant_ ? &*int_quant_ : nullptr; }
  void set_int_quant(std::optional<IntQuantization> q) { int_quant_ = std::move(q); }

 private:
  std::optional<IntQuantization> int_quant_;
};

Result<std::unique_ptr<WeightSource>> open_safetensors_source(const std::string& dir);
std::unique_ptr<WeightSource> make_gguf_source(std::shared_ptr<io::GgufFile> gguf);
// Random weights: normal-ish (uniform with the given standard deviation) values stored as
// `dtype`; the same seed and name always give the same tensor.
std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, DType dtype, double stddev);
// Dummy weights of the AWQ or GPTQ checkpoint of a config (`quant`: its quantization_config):
// the layers such a checkpoint quantizes (int_quant.h int_quantizes_layer()) have no `.weight`
// but `.qweight`, `.qzeros`, `.scales` (and for GPTQ `.g_idx`) in the format's dtypes (int32, f16)
// and the shapes the loader asks for: random codes, zero points in the middle of the range, one
// scale giving the weights about `stddev`, and with desc_act a g_idx whose groups are not
// contiguous, as act-order leaves them. Every other tensor is `floats`'s. Loading or estimating
// from it makes the storage decisions a real checkpoint of the config makes (int_quant() is set).
std::unique_ptr<WeightSource> make_int_quant_dummy_source(std::unique_ptr<WeightSource> floats,
                                                          const IntQuantization& quant,
                                                          uint64_t seed, double stddev);

// rows [begin, end) of the full tensor `t` (outermost dimension) as a view of the same bytes.
Result<io::TensorRef> tensor_rows(const io::TensorRef& t, int64_t begin, int64_t end,
                                  const std::string& source);

// Checks a tensor's shape; the error names the source and tensor.
Status check_shape(const io::TensorRef& t, const std::vector<int64_t>& shape,
                   const std::string& source);

}  // namespace strata
