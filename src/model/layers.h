// Helpers shared by the architecture files: checkpoint name tables, loading a matmul weight into
// the kernels' packed layout, norm vectors, the embedding table, and small element-wise ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/packed_weight.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace strata {

// A checkpoint tensor's name in each naming scheme; "{L}" stands for the layer index.
struct TensorName {
  const char* hf;
  const char* gguf;
};

std::string tensor_name(const TensorName& name, TensorNaming naming, int64_t layer = -1);

// Resolves the storage dtype of matmul weights: `requested` when set, else the tensor's own
// dtype (F32/F16/BF16/Q8_0 kept; others become BF16).
DType matmul_storage(std::optional<DType> requested, DType tensor_dtype);

// Loads and packs one or more [n_i, k] tensors stacked as rows of one weight (fused QKV, gate/up).
// FP8 checkpoint tensors (F8E4M3 with a sibling `<name>_scale_inv` of fp8 blocks) stay FP8 with
// their scales whatever `storage` says; `storage` F8E4M3 quantises float tensors into fp8 blocks
// (dummy weights of FP8 models).
// A part is the tensor's rows [begin, end) (end -1: to `rows`), what a tensor-parallel rank loads
// of a sharded weight (WeightSource::get_rows); `rows` is the whole tensor's. A slice holds exactly
// the whole weight's rows: FP8 checkpoint tensors keep their rows' block scales, AWQ/GPTQ layers
// are unpacked and cut by rows; weights quantized into FP8 blocks at load need slices on whole
// blocks of block_n rows (else an error).
struct RowPart {
  TensorName name;
  int64_t rows;
  int64_t begin = 0, end = -1;
  int64_t local_rows() const { return (end < 0 ? rows : end) - begin; }
  bool sliced() const { return begin != 0 || (end >= 0 && end != rows); }
};
Result<PackedWeight> load_packed(WeightSource& src, const std::vector<RowPart>& parts, int64_t k,
                                 int64_t layer, std::optional<DType> storage,
                                 const Fp8Quantization& fp8 = {});

// How load_packed() stores a float or FP8 weight whose parts the checkpoint stores as
// `part_dtypes` (AWQ/GPTQ layers aside, see plan_packed): the storage dtype and, for F8E4M3, the
// column block. load_packed() itself decides with it.
struct PackedStorage {
  DType dtype = DType::kF32;
  int64_t fp8_block_k = 128;  // F8E4M3 only
};
PackedStorage packed_storage(const std::vector<DType>& part_dtypes, int64_t k,
                             std::optional<DType> storage, const Fp8Quantization& fp8);

// What load_packed() would build from these parts, from the tensors' metadata alone
// (WeightSource::peek; AWQ/GPTQ layers also read their small g_idx / scale tensors to decide
// between the integer layout and the exact F32 fallback): its storage, shape and packed bytes
// (PackedWeight::bytes_for). Errors for missing tensors and wrong shapes as load_packed() gives
// them.
struct WeightPlan {
  DType dtype = DType::kF32;
  int64_t n = 0, k = 0, bytes = 0;
};
Result<WeightPlan> plan_packed(WeightSource& src, const std::vector<RowPart>& parts, int64_t k,
                               int64_t layer, std::optional<DType> storage,
                               const Fp8Quantization& fp8 = {});
// The same for a weight packed from float rows with PackedWeight::pack(.., storage), with its
// errors for storages it cannot pack into.
Result<WeightPlan> plan_pack(int64_t n, int64_t k, DType storage);

// Loads a [n, k] tensor as a row-major f32 matrix (FP8 checkpoint tensors dequantised with their
// `_scale_inv` block scales, AWQ/GPTQ/compressed-tensors layers with their groups' scales and
// zeros).
Result<std::vector<float>> load_matrix_f32(WeightSource& src, const TensorName& name, int64_t n,
                                           int64_t k, int64_t layer,
                                           const Fp8Quantization& fp8 = {});
// What load_matrix_f32() checks of the tensor, reading no weights (for memory estimates).
Status plan_matrix_f32(WeightSource& src, const TensorName& name, int64_t n, int64_t k,
                       int64_t layer);

// Loads a 1-D tensor (norm weight, bias) as f32; `init` is what dummy weights use.
Result<std::vector<float>> load_vector(WeightSource& src, const TensorName& name, int64_t n,
                                       int64_t layer, DummyInit init);
// Elements [begin, end) of the 1-D tensor of n (a tensor-parallel rank's slice of a bias).
Result<std::vector<float>> load_vector_range(WeightSource& src, const TensorName& name, int64_t n,
                                             int64_t layer, DummyInit init, int64_t begin,
                                             int64_t end);

// The bytes load_vector() would hold (n f32 values), from the tensor's metadata; its errors.
Result<int64_t> plan_vector(WeightSource& src, const TensorName& name, int64_t n, int64_t layer);

// The token embedding table [vocab, hidden]: used in place from the checkpoint when its dtype is
// kept, else converted into an owned buffer. A vocab-parallel rank holds the rows [row_begin,
// row_end) (row_end -1: to vocab).
class EmbeddingTable {
 public:
  static Result<EmbeddingTable> load(WeightSource& src, const TensorName& name, int64_t vocab,
                                     int64_t hidden, std::optional<DType> storage,
                                     bool keep_in_place, int64_t row_begin = 0,
                                     int64_t row_end = -1);
  // The dtype load() holds the table `t` ([vocab, hidden]) in; errors for dtypes it cannot hold.
  static Result<DType> storage_for(const io::TensorRef& t, int64_t hidden,
                                   std::optional<DType> storage);
  // out[i, :] = row ids[i]; ids must be in range. A rank holding part of the vocabulary writes
  // zeros for the ids it does not hold.
  void lookup(const int32_t* ids, int64_t n, float* out, int64_t ld, ThreadPool& pool) const;
  // Whether the table holds the row of `id`.
  bool holds(int64_t id) const { return id >= begin_ && id < begin_ + rows_; }
  // A copy of the (held rows of the) table as a packed matmul weight (tied LM head).
  Result<PackedWeight> as_packed(DType storage) const;
  DType dtype() const { return dtype_; }
  int64_t bytes() const { return dtype_bytes(dtype_, rows_ * cols_); }

 private:
  DType dtype_ = DType::kF32;
  int64_t begin_ = 0;  // the vocabulary id of the first row held
  int64_t rows_ = 0, cols_ = 0;
  const std::byte* data_ = nullptr;
  AlignedBuffer owned_;
};

// y[i, :] += x[i, :] for m rows of n.
void add_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t m, int64_t n,
              ThreadPool& pool);
// y[i, :] += bias for m rows.
void add_bias(float* y, int64_t ldy, const float* bias, int64_t m, int64_t n);

}  // namespace strata
