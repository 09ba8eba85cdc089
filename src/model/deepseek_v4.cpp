// DeepseekV4ForCausalLM on the engine's batches (model/deepseek_v4.h).
#include "model/deepseek_v4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/check.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/rng.h"
#include "kernels/dsv4.h"
#include "kernels/fp8.h"
#include "model/exact_split.h"
#include "model/parallel.h"

namespace strata {
namespace {

using dsv4::AttnKind;
using dsv4::DeepseekV4Config;

constexpr int64_t kAlign = 16;  // floats: every workspace buffer starts on 64 bytes
int64_t round_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

int64_t shared_dim(const DeepseekV4Config& c) {
  return c.moe_intermediate_size * c.n_shared_experts;
}

// ------------------------------------------------------------------------------ tensor parallel

// One rank's share of the model under tensor parallelism (model/parallel.h: exact, no float sum
// crosses ranks, greedy output bit-identical to one process for any size):
//   - attention: the o_groups groups of heads split over the ranks (rank r: groups
//     shard_range(o_groups, size, r), their heads' rows of wq_b, their sinks and wo_a); every
//     rank computes the single shared K=V row, the compressors, the indexer and its top-k itself
//     (replicated), so every rank keeps the whole paged KV and per-sequence state; the ranks
//     all-gather the groups' wo_a outputs, then wo_b is split by output rows (RowSplitLinear);
//   - the shared expert: rows of w1 and w3 split, all-gathered into whole rows (the clamped
//     SwiGLU runs over the whole row as on one process), w2 split by output rows;
//   - routed experts: whole experts split over the ranks, with or without
//     --enable-expert-parallel (as DeepSeek-V3's MoeBlock): every rank routes every token alike,
//     runs its experts, the ranks all-gather the outputs and every rank adds them per token in the
//     order of one process. Splitting an MXFP4 expert's rows would be exact too, but costs an
//     all-gather per expert; splitting w2's input dimension would not be (a float sum across
//     ranks);
//   - embedding and output head split by vocabulary rows (the embedding's rows gathered per
//     token from their owner, the logits all-gathered); hyper-connections, norms, the router and
//     the hash tables replicated.
struct Split {
  int size = 1, rank = 0;
  Comm* comm = nullptr;  // null: one process
  int64_t heads_per_group = 0;
  ShardRange groups, experts, vocab, shared;  // this rank's
  std::vector<int64_t> group_widths;          // per rank: its groups x o_lora_rank (u columns)
  std::vector<int64_t> shared_rows;           // per rank: its rows of w1 (and of w3)
  bool split() const { return size > 1; }
  int64_t h0() const { return groups.begin * heads_per_group; }
  int64_t heads() const { return groups.size() * heads_per_group; }
  int64_t max_group_width() const {
    return *std::max_element(group_widths.begin(), group_widths.end());
  }
  int64_t max_shared_rows() const {
    return *std::max_element(shared_rows.begin(), shared_rows.end());
  }
};

Split split_of(const DeepseekV4Config& c, const ModelParallel& p) {
  Split s;
  s.size = std::max(p.tp_size, 1);
  s.rank = s.size > 1 ? p.tp_rank : 0;
  s.comm = s.size > 1 ? p.tp : nullptr;
  s.heads_per_group = c.o_groups > 0 ? c.num_attention_heads / c.o_groups : 0;
  s.groups = shard_range(c.o_groups, s.size, s.rank);
  s.experts = shard_range(c.n_routed_experts, s.size, s.rank);
  s.vocab = shard_range(c.vocab_size, s.size, s.rank);
  s.shared = shard_range(shared_dim(c), s.size, s.rank);
  for (int r = 0; r < s.size; ++r) {
    s.group_widths.push_back(shard_range(c.o_groups, s.size, r).size() * c.o_lora_rank);
    s.shared_rows.push_back(shard_range(shared_dim(c), s.size, r).size());
  }
  return s;
}

// Rows of an n-row weight that rank `rank` of `size` holds as a RowSplitLinear (whole panels).
ShardRange row_split_rows(int64_t n, int size, int rank) {
  if (size <= 1) return {0, n};
  const ShardRange p = row_split_panels(n, size, rank);
  return {std::min(n, p.begin * kPanelRows), std::min(n, p.end * kPanelRows)};
}

// ------------------------------------------------------------------------------ KV rows

// How one layer's rows are stored at the KV dtype: compressed / window rows of head_dim values
// (fp8: the published block layout over a region of `rows` rows), indexer keys of index_head_dim
// values (fp8: e4m3 values then one f32 scale = max|x| / 448).
struct KvCodec {
  DType dtype = DType::kF32;
  int64_t hd = 0, rd = 0, id = 0;
  bool fp8() const { return dtype == DType::kF8E4M3; }
  dsv4::Fp8KvBlockLayout layout(int64_t rows) const {
    dsv4::Fp8KvBlockLayout l;
    l.block_tokens = rows;
    l.nope = hd - rd;
    l.rope = rd;
    return l;
  }
  int64_t main_region_bytes(int64_t rows) const {
    if (rows == 0) return 0;
    return fp8() ? layout(rows).block_bytes() : rows * hd * dtype_block_bytes(dtype);
  }
  int64_t idx_row_bytes() const { return fp8() ? id + 4 : id * dtype_block_bytes(dtype); }
  void put_main(std::byte* region, int64_t rows, int64_t i, const float* row) const {
    if (fp8()) {
      dsv4::pack_kv_token_fp8(layout(rows), row, i, reinterpret_cast<uint8_t*>(region));
    } else {
      quantize_row(dtype, row, region + i * hd * dtype_block_bytes(dtype), hd);
    }
  }
  void get_main(const std::byte* region, int64_t rows, int64_t i, float* row) const {
    if (fp8()) {
      dsv4::unpack_kv_token_fp8(layout(rows), reinterpret_cast<const uint8_t*>(region), i, row);
    } else {
      dequantize_row(dtype, region + i * hd * dtype_block_bytes(dtype), row, hd);
    }
  }
  // get_main through the kernel table (fp8: kernels/dsv4.h's row decode, the same bits).
  void get_main(const KernelOps& ops, const std::byte* region, int64_t rows, int64_t i,
                float* row) const {
    if (!fp8()) return get_main(region, rows, i, row);
    const dsv4::Fp8KvBlockLayout l = layout(rows);
    const uint8_t* b = reinterpret_cast<const uint8_t*>(region);
    dsv4_unpack_fp8_row(ops, b + l.data_offset(i), b + l.scale_offset(i), l.nope, l.rope, row);
  }
  void put_idx(std::byte* region, int64_t i, const float* row) const {
    std::byte* dst = region + i * idx_row_bytes();
    if (fp8()) {
      float amax = 0;
      for (int64_t j = 0; j < id; ++j) amax = std::max(amax, std::abs(row[j]));
      const float scale = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
      for (int64_t j = 0; j < id; ++j)
        dst[j] = static_cast<std::byte>(f32_to_fp8_e4m3(row[j] / scale));
      std::memcpy(dst + id, &scale, 4);
    } else {
      quantize_row(dtype, row, dst, id);
    }
  }
  void get_idx(const std::byte* region, int64_t i, float* row) const {
    const std::byte* src = region + i * idx_row_bytes();
    if (fp8()) {
      float scale;
      std::memcpy(&scale, src + id, 4);
      for (int64_t j = 0; j < id; ++j)
        row[j] = fp8_e4m3_to_f32(static_cast<uint8_t>(src[j])) * scale;
    } else {
      dequantize_row(dtype, src, row, id);
    }
  }
};

Status check_kv_dtype(const DeepseekV4Config& c, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kF8E4M3)
    return invalid_argument(std::string("DeepSeek-V4 KV cache dtype must be f32, f16, bf16 or ") +
                            "fp8, not " + dtype_name(dtype));
  if (dtype == DType::kF8E4M3) {
    auto l = dsv4::fp8_kv_block_layout(c.head_dim, c.qk_rope_head_dim, 1);
    if (!l.ok())
      return invalid_argument("the fp8 KV cache of DeepSeek-V4 needs the published layout: " +
                              l.status().message());
  }
  return Status();
}

KvCodec codec_for(const DeepseekV4Config& c, DType dtype) {
  KvCodec k;
  k.dtype = dtype;
  k.hd = c.head_dim;
  k.rd = c.qk_rope_head_dim;
  k.id = c.index_head_dim;
  return k;
}

int64_t layer_block_bytes(const DeepseekV4Config& c, int64_t layer, int64_t block_size,
                          DType dtype) {
  const int ratio = c.compress_ratio(layer);
  if (ratio == 0) return 0;
  const KvCodec k = codec_for(c, dtype);
  const int64_t rows = block_size / ratio;
  int64_t bytes = k.main_region_bytes(rows);
  if (ratio == 4) bytes += rows * k.idx_row_bytes();
  return bytes;
}

// Where each layer's state sits in a slot (bytes from the slot's start).
struct StateLayout {
  struct Layer {
    int64_t ring = 0;                      // window ring: main_region_bytes(sliding_window)
    int64_t comp = -1, comp_floats = 0;    // compressor kv then score: comp_floats each
    int64_t icomp = -1, icomp_floats = 0;  // indexer's compressor
  };
  std::vector<Layer> layers;
  int64_t bytes = 0;
};

StateLayout state_layout(const DeepseekV4Config& c, DType dtype) {
  const KvCodec k = codec_for(c, dtype);
  StateLayout s;
  int64_t off = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    StateLayout::Layer L;
    L.ring = off;
    off = round_up(off + k.main_region_bytes(c.sliding_window), 64);
    const int ratio = c.compress_ratio(l);
    if (ratio != 0) {
      const int64_t coff = ratio == 4 ? 2 : 1;
      L.comp = off;
      L.comp_floats = coff * ratio * coff * c.head_dim;
      off = round_up(off + 2 * L.comp_floats * 4, 64);
    }
    if (ratio == 4) {
      L.icomp = off;
      L.icomp_floats = 2 * 4 * 2 * c.index_head_dim;
      off = round_up(off + 2 * L.icomp_floats * 4, 64);
    }
    s.layers.push_back(L);
  }
  s.bytes = off;
  return s;
}

std::string describe_kv(const DeepseekV4Config& c, DType dtype, int64_t block_size,
                        int64_t context_len) {
  const KvCodec k = codec_for(c, dtype);
  int64_t row =
      k.fp8() ? k.hd - k.rd + 2 * k.rd + (k.hd - k.rd) / 64 + 1 : k.hd * dtype_block_bytes(dtype);
  int64_t csa = 0, hca = 0, win = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const AttnKind kind = c.attn_kind(l);
    (kind == AttnKind::kCsa ? csa : kind == AttnKind::kHca ? hca : win) += 1;
  }
  int64_t paged = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    paged += layer_block_bytes(c, l, block_size, dtype);
  const int64_t blocks = (context_len + block_size - 1) / block_size;
  std::string s =
      std::string("DeepSeek-V4 KV (") + dtype_name(dtype) + "): " + std::to_string(row) +
      " B per window/c4/c128 row, " + std::to_string(k.idx_row_bytes()) +
      " B per indexer key; layers: " + std::to_string(win) + " window-only, " +
      std::to_string(csa) + " c4+indexer, " + std::to_string(hca) + " c128; paged " +
      std::to_string(paged) + " B per block of " + std::to_string(block_size) + " tokens (" +
      std::to_string(blocks * paged / (1024 * 1024)) + " MiB at " + std::to_string(context_len) +
      " tokens), state " + std::to_string(state_layout(c, dtype).bytes) +
      " B per sequence (window ring + compressor rows)";
  if (k.fp8()) s += "; " + dsv4::kv_summary(c, context_len);
  return s;
}

// ------------------------------------------------------------------------------ sizes

struct Dims {
  int64_t n = 0, dim = 0, hc = 0, h = 0, hd = 0, rd = 0, ql = 0, G = 0, olr = 0, E = 0, k = 0;
  int64_t inter = 0, sh = 0, ih = 0, id = 0, win = 0, vocab = 0, R = 0, max_seq = 0;
  bool any_comp = false, any_csa = false, any_hca = false;
  int threads = 1;
  // Tensor parallelism (Split): the ranks, this rank's heads, the widest per-rank slices that
  // the all-gathers move.
  int size = 1;
  int64_t hl = 0, max_u = 0, max_sh = 0, wo_rows = 0, head_rows = 0;
  // The all-gathers' scratch (gather_columns_scratch and the like) and the shared expert's local
  // gate|up rows; none for one process.
  int64_t tp_scratch_floats() const {
    if (size <= 1) return 0;
    const int64_t widest =
        std::max({n * dim, n * max_u, n * wo_rows, n * 2 * max_sh, n * k * dim, R * head_rows});
    return (size + 1) * widest;
  }
  int64_t tp_local_floats() const { return size > 1 ? n * 2 * max_sh : 0; }
  int64_t max_comp_keys() const {
    int64_t m = 0;
    if (any_hca) m = std::max(m, max_seq / 128 + 1);
    if (any_csa) m = std::max(m, std::min(k_topk, max_seq / 4 + 1));
    return m;
  }
  int64_t k_topk = 0;
  int64_t max_idx_rows() const { return any_csa ? max_seq / 4 + 1 : 0; }
  int64_t scratch_floats() const {
    const int64_t keys = win + max_comp_keys();
    return round_up(keys * hd, kAlign) + round_up(keys, kAlign) + round_up(max_idx_rows(), kAlign) +
           round_up(std::max(hd, id), kAlign);
  }
  int64_t scratch_ints() const { return round_up(max_idx_rows(), kAlign); }
};

Dims dims_of(const DeepseekV4Config& c, const WorkspaceLimits& lim, int threads, const Split& sp) {
  Dims d;
  d.size = sp.size;
  d.hl = sp.heads();
  d.max_u = sp.max_group_width();
  d.max_sh = sp.max_shared_rows();
  d.wo_rows = row_split_max_rows(c.hidden_size, sp.size);
  d.head_rows = row_split_max_rows(c.vocab_size, sp.size);
  d.n = lim.max_num_tokens;
  d.dim = c.hidden_size;
  d.hc = c.hc_mult;
  d.h = c.num_attention_heads;
  d.hd = c.head_dim;
  d.rd = c.qk_rope_head_dim;
  d.ql = c.q_lora_rank;
  d.G = c.o_groups;
  d.olr = c.o_lora_rank;
  d.E = c.n_routed_experts;
  d.k = c.num_experts_per_tok;
  d.inter = c.moe_intermediate_size;
  d.sh = shared_dim(c);
  d.ih = c.index_n_heads;
  d.id = c.index_head_dim;
  d.win = c.sliding_window;
  d.vocab = c.vocab_size;
  d.R = lim.max_logit_rows;
  d.max_seq = lim.max_seq_len;
  d.k_topk = c.index_topk;
  d.threads = threads;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int r = c.compress_ratio(l);
    d.any_comp |= r != 0;
    d.any_csa |= r == 4;
    d.any_hca |= r == 128;
  }
  return d;
}

// The forward's buffers; planned once (sizes only) and once with the memory.
struct Workspace {
  float *streams, *x, *post, *comb, *qr, *q, *kv_raw, *kv, *cw, *icw, *iq, *iw, *o, *u, *out;
  float *rl, *rw, *gu, *act, *xg, *eg, *eu, *eo, *expert_out, *head_in, *head_y, *scratch;
  float *tp, *tp_local;  // tensor parallelism: the all-gathers' scratch, local gate|up rows
  int32_t *ids, *expert_rows, *expert_count, *iscratch;
};

// Returns {floats, ints}; with `f`/`i` non-null, sets the pointers of `w`.
std::pair<int64_t, int64_t> plan_workspace(const Dims& d, Workspace* w, float* f, int32_t* i) {
  int64_t fo = 0, io = 0;
  auto F = [&](float** p, int64_t count) {
    if (f != nullptr) *p = f + fo;
    fo += round_up(std::max<int64_t>(count, 1), kAlign);
  };
  auto I = [&](int32_t** p, int64_t count) {
    if (i != nullptr) *p = i + io;
    io += round_up(std::max<int64_t>(count, 1), kAlign);
  };
  Workspace dummy{};
  Workspace& W = w != nullptr ? *w : dummy;
  const int64_t n = d.n;
  F(&W.streams, n * d.hc * d.dim);
  F(&W.x, n * d.dim);
  F(&W.post, n * d.hc);
  F(&W.comb, n * d.hc * d.hc);
  F(&W.qr, n * d.ql);
  F(&W.q, n * d.hl * d.hd);
  F(&W.kv_raw, n * d.hd);
  F(&W.kv, n * d.hd);
  F(&W.cw, d.any_comp ? n * 4 * d.hd : 0);
  F(&W.icw, d.any_csa ? n * 4 * d.id : 0);
  F(&W.iq, d.any_csa ? n * d.ih * d.id : 0);
  F(&W.iw, d.any_csa ? n * d.ih : 0);
  F(&W.o, n * d.hl * d.hd);
  F(&W.u, n * d.G * d.olr);
  F(&W.out, n * d.dim);
  F(&W.rl, n * d.E);
  F(&W.rw, n * d.k);
  F(&W.gu, n * 2 * d.sh);
  F(&W.act, n * std::max(d.sh, d.inter));
  F(&W.xg, n * d.dim);
  F(&W.eg, n * d.inter);
  F(&W.eu, n * d.inter);
  F(&W.eo, n * d.dim);
  F(&W.expert_out, n * d.k * d.dim);
  F(&W.head_in, d.R * d.hc * d.dim);
  F(&W.head_y, d.R * d.dim);
  F(&W.scratch, d.threads * d.scratch_floats());
  if (d.size > 1) {
    F(&W.tp, d.tp_scratch_floats());
    F(&W.tp_local, d.tp_local_floats());
  }
  I(&W.ids, n * d.k);
  I(&W.expert_rows, n * d.k);
  I(&W.expert_count, d.E + 1);
  I(&W.iscratch, d.threads * d.scratch_ints());
  return {fo, io};
}

int64_t workspace_bytes_for(const Dims& d) {
  auto [f, i] = plan_workspace(d, nullptr, nullptr, nullptr);
  return f * 4 + i * 4;
}

// Every matmul weight of the model (name, rows, cols, class), in forward order; the experts
// (MXFP4) marked. Shared by loading and the memory estimate.
struct MatmulPlan {
  std::string name;
  int64_t rows, cols;
  int64_t WeightBytesByClass::*cls;
  bool expert = false;  // MXFP4: packed k/2 bytes + k/32 scales per row
  bool router = false;  // kept f32
  Sharding sharding = Sharding::kReplicated;
};

// This rank's (Split): its heads' rows of wq_b, its groups' wo_a, its panels of wo_b, w2 and
// the head, its rows of w1/w3, its experts.
std::vector<MatmulPlan> matmul_plan(const DeepseekV4Config& c, const Split& sp) {
  std::vector<MatmulPlan> p;
  const int64_t dim = c.hidden_size, hd = c.head_dim;
  const int64_t group_in = c.num_attention_heads * hd / c.o_groups, sh = shared_dim(c);
  const bool split = sp.split();
  const Sharding column = split ? Sharding::kColumn : Sharding::kReplicated;
  const Sharding row = split ? Sharding::kRow : Sharding::kReplicated;
  const ShardRange wo_rows = row_split_rows(dim, sp.size, sp.rank);
  const ShardRange head_rows = row_split_rows(c.vocab_size, sp.size, sp.rank);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string L = "layers." + std::to_string(l) + ".";
    const int ratio = c.compress_ratio(l);
    const int64_t coff = ratio == 4 ? 2 : 1;
    p.push_back({L + "attn.wq_a", c.q_lora_rank, dim, &WeightBytesByClass::attention});
    p.push_back({L + "attn.wq_b", sp.heads() * hd, c.q_lora_rank, &WeightBytesByClass::attention,
                 false, false, column});
    p.push_back({L + "attn.wkv", hd, dim, &WeightBytesByClass::attention});
    if (ratio != 0)
      p.push_back(
          {L + "attn.compressor.wkv_wgate", 2 * coff * hd, dim, &WeightBytesByClass::attention});
    if (ratio == 4) {
      p.push_back({L + "attn.indexer.compressor.wkv_wgate", 4 * c.index_head_dim, dim,
                   &WeightBytesByClass::attention});
      p.push_back({L + "attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
                   &WeightBytesByClass::attention});
      p.push_back(
          {L + "attn.indexer.weights_proj", c.index_n_heads, dim, &WeightBytesByClass::attention});
    }
    for (int64_t g = sp.groups.begin; g < sp.groups.end; ++g)
      p.push_back({L + "attn.wo_a." + std::to_string(g), c.o_lora_rank, group_in,
                   &WeightBytesByClass::attention, false, false, column});
    p.push_back({L + "attn.wo_b", wo_rows.size(), c.o_groups * c.o_lora_rank,
                 &WeightBytesByClass::attention, false, false, row});
    MatmulPlan gate{L + "moe.router", c.n_routed_experts, dim, &WeightBytesByClass::router};
    gate.router = true;
    p.push_back(gate);
    if (sh > 0) {
      p.push_back({L + "moe.shared.w1_w3", 2 * sp.shared.size(), dim,
                   &WeightBytesByClass::shared_experts, false, false, column});
      p.push_back({L + "moe.shared.w2", wo_rows.size(), sh, &WeightBytesByClass::shared_experts,
                   false, false, row});
    }
    for (int64_t e = sp.experts.begin; e < sp.experts.end; ++e) {
      const std::string E = L + "moe.experts." + std::to_string(e) + ".";
      for (const char* w : {"w1", "w3", "w2"}) {
        MatmulPlan m{E + w, w[1] == '2' ? dim : c.moe_intermediate_size,
                     w[1] == '2' ? c.moe_intermediate_size : dim,
                     &WeightBytesByClass::routed_experts};
        m.expert = true;
        m.sharding = Sharding::kExpert;
        p.push_back(m);
      }
    }
  }
  p.push_back({"lm_head", head_rows.size(), dim, &WeightBytesByClass::lm_head, false, false,
               split ? Sharding::kVocab : Sharding::kReplicated});
  return p;
}

int64_t mxfp4_bytes(int64_t n, int64_t k) {
  return n * (k / 2) + n * (k / dsv4::kMxfp4Group);
}

// The checkpoint tensors (names without ".weight") a matmul of the plan is packed from.
std::vector<std::string> plan_tensors(const MatmulPlan& m) {
  const std::string& n = m.name;
  auto ends = [&](const std::string& tail) {
    return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
  };
  auto head = [&](const std::string& tail) { return n.substr(0, n.size() - tail.size()); };
  if (n == "lm_head") return {"head"};
  if (ends("compressor.wkv_wgate")) {
    const std::string p = head("wkv_wgate");
    return {p + "wkv", p + "wgate"};
  }
  if (ends("moe.shared.w1_w3"))
    return {head("moe.shared.w1_w3") + "ffn.shared_experts.w1",
            head("moe.shared.w1_w3") + "ffn.shared_experts.w3"};
  if (ends("moe.shared.w2")) return {head("moe.shared.w2") + "ffn.shared_experts.w2"};
  if (ends("moe.router")) return {head("moe.router") + "ffn.gate"};
  const size_t wo_a = n.find("attn.wo_a.");
  if (wo_a != std::string::npos) return {n.substr(0, wo_a) + "attn.wo_a"};
  return {n};
}

// The matmuls of an FP8 checkpoint kept as FP8 (e4m3 values with one f32 scale per row and
// column block of block_k, kernels/packed_weight.h): those whose checkpoint tensors are all e4m3.
// The others (routed experts aside) are packed at the storage dtype.
struct Fp8Linears {
  std::set<std::string> plans;  // MatmulPlan names
  int64_t block_k = 128;
  bool has(const MatmulPlan& m) const { return plans.count(m.name) != 0; }
};

DType plan_dtype(const MatmulPlan& m, DType storage, const Fp8Linears* fp8 = nullptr) {
  if (fp8 != nullptr && fp8->has(m)) return DType::kF8E4M3;
  return m.expert ? DType::kU8 : m.router ? DType::kF32 : storage;
}
int64_t plan_bytes(const MatmulPlan& m, DType storage, const Fp8Linears* fp8 = nullptr) {
  if (fp8 != nullptr && fp8->has(m))
    return PackedWeight::bytes_for(DType::kF8E4M3, m.rows, m.cols, fp8->block_k);
  return m.expert ? mxfp4_bytes(m.rows, m.cols)
                  : PackedWeight::bytes_for(plan_dtype(m, storage), m.rows, m.cols);
}

// The checkpoint's tensors and shapes (dsv4::checkpoint_tensors, without mtp.*).
std::map<std::string, std::vector<int64_t>> checkpoint_shapes(const DeepseekV4Config& c) {
  std::map<std::string, std::vector<int64_t>> m;
  for (const dsv4::TensorSpec& t : dsv4::checkpoint_tensors(c, false)) m[t.name] = t.shape;
  return m;
}

// Which matmuls of a checkpoint stay FP8 (from the tensors' dtypes, reading no values). A
// matmul whose tensors are missing is not FP8 (loading it then names the missing tensor).
Result<Fp8Linears> fp8_linears(const DeepseekV4Config& c, WeightSource& src) {
  Fp8Linears f;
  f.block_k = c.weight_block_k;
  if (!c.fp8_weights || c.weight_block_k % kPanelRows != 0) return f;
  const auto shapes = checkpoint_shapes(c);
  // Every matmul of the whole model (a rank's plan names are among them).
  for (const MatmulPlan& m : matmul_plan(c, split_of(c, ModelParallel{}))) {
    if (m.expert || m.router) continue;
    bool all = true;
    for (const std::string& t : plan_tensors(m)) {
      const std::string w = t + ".weight";
      auto it = shapes.find(w);
      if (it == shapes.end() || !src.has(w)) {
        all = false;
        break;
      }
      STRATA_ASSIGN_OR_RETURN(io::TensorRef r, src.peek(w, it->second));
      all = all && r.dtype == DType::kF8E4M3;
    }
    if (all) f.plans.insert(m.name);
  }
  return f;
}

// Non-matmul weights in floats (norms, hc, sinks, ape, biases) and the hash tables (int32), and
// the embedding at `storage`.
WeightBytesByClass weight_bytes(const DeepseekV4Config& c, DType storage, const Split& sp,
                                const Fp8Linears* fp8 = nullptr) {
  WeightBytesByClass b;
  for (const MatmulPlan& m : matmul_plan(c, sp))
    b.add_matmul(m.cls, plan_dtype(m, storage, fp8), plan_bytes(m, storage, fp8));
  b.embedding = sp.vocab.size() * c.hidden_size * dtype_block_bytes(storage);
  const int64_t dim = c.hidden_size, hc = c.hc_mult, mix = c.hc_mix_dim();
  int64_t other = dim + hc * hc * dim + hc + 1;  // norm, hc_head
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int ratio = c.compress_ratio(l);
    const int64_t coff = ratio == 4 ? 2 : 1;
    other += 2 * dim + 2 * (mix * hc * dim + mix + 3);                // norms, hc_attn / hc_ffn
    other += c.q_lora_rank + c.head_dim + sp.heads();                 // q_norm, kv_norm, sinks
    if (ratio != 0) other += ratio * coff * c.head_dim + c.head_dim;  // ape, norm
    if (ratio == 4) other += 4 * 2 * c.index_head_dim + c.index_head_dim;
    if (c.hash_routed(l))
      other += c.vocab_size * c.num_experts_per_tok;  // tid2eid (int32)
    else
      other += c.n_routed_experts;  // bias
  }
  b.other = other * 4;
  b.weight_dtype = storage;
  return b;
}

// ------------------------------------------------------------------------------ weights

// Where the float weights come from: float64 weights (tests) or deterministic dummy values.
class Feed {
 public:
  virtual ~Feed() = default;
  // name: the checkpoint-style name; [rows, cols]; lo/hi: the dummy range.
  virtual std::vector<float> get(const std::string& name, int64_t count, double lo, double hi) = 0;
  // Rows [r0, r1) of the [n, k] matrix `name`: exactly get(name, n * k, lo, hi)'s values at those
  // rows (what a tensor-parallel rank keeps). This default slices the whole tensor (dummy and
  // reference weights); a checkpoint reads and dequantizes only those rows.
  virtual std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1, int64_t n,
                                  int64_t k, double lo, double hi) {
    std::vector<float> all = get(name, n * k, lo, hi);
    if (r0 == 0 && r1 == n) return all;
    return std::vector<float>(all.begin() + r0 * k, all.begin() + r1 * k);
  }
  virtual void expert(int64_t layer, int64_t e, int which, int64_t n, int64_t k,
                      std::vector<uint8_t>* q, std::vector<uint8_t>* s) = 0;
  virtual std::vector<int32_t> tid2eid(int64_t layer) = 0;
  // FP8 checkpoints: rows [r0, r1) of the e4m3 matrix `name` ([r1 - r0, k] bytes into `q`) and
  // each row's block scales as f32 ([r1 - r0, ceil(k / block_k)] into `scales`).
  virtual Status fp8_rows(const std::string& name, int64_t r0, int64_t r1, std::vector<uint8_t>* q,
                          std::vector<float>* scales) {
    (void)r0, (void)r1, (void)q, (void)scales;
    return unimplemented(name + ": these weights have no FP8 tensors");
  }
  // The first error of a feed that reads a checkpoint: get(), expert() and tid2eid() cannot
  // fail, so after an error they return zeros of the right size and load() returns this.
  virtual Status status() const { return Status(); }
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

class DummyFeed final : public Feed {
 public:
  DummyFeed(const DeepseekV4Config& c, uint64_t seed, ThreadPool* pool)
      : c_(c), seed_(seed), pool_(pool) {}
  // One RNG stream per chunk of 2^16 values of the tensor (seeded by the seed, the name and the
  // chunk), generated in parallel: the values do not depend on the thread count.
  std::vector<float> get(const std::string& name, int64_t count, double lo, double hi) override {
    return values(name, 0, count, lo, hi);
  }
  // Only the chunks holding rows [r0, r1): the whole tensor's values at those rows.
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1, int64_t, int64_t k,
                          double lo, double hi) override {
    return values(name, r0 * k, r1 * k, lo, hi);
  }
  void expert(int64_t layer, int64_t e, int which, int64_t n, int64_t k, std::vector<uint8_t>* q,
              std::vector<uint8_t>* s) override {
    const double a = std::sqrt(3.0 / static_cast<double>(k));
    const std::vector<float> w = get("layers." + std::to_string(layer) + ".ffn.experts." +
                                         std::to_string(e) + ".w" + std::to_string(which),
                                     n * k, -a, a);
    q->resize(n * k / 2);
    s->resize(n * k / dsv4::kMxfp4Group);
    auto rows = [&](int64_t r0, int64_t r1) {  // rows are quantised independently
      dsv4::quantize_mxfp4(w.data() + r0 * k, r1 - r0, k, q->data() + r0 * (k / 2),
                           s->data() + r0 * (k / dsv4::kMxfp4Group));
    };
    if (pool_ != nullptr)
      pool_->parallel_for(n, 16, rows);
    else
      rows(0, n);
  }
  std::vector<int32_t> tid2eid(int64_t) override {
    const int64_t k = c_.num_experts_per_tok, e = c_.n_routed_experts;
    std::vector<int32_t> t(c_.vocab_size * k);
    for (int64_t v = 0; v < c_.vocab_size; ++v)  // k distinct experts per token
      for (int64_t i = 0; i < k; ++i)
        t[v * k + i] = static_cast<int32_t>((v * 7 + i * (e / k > 0 ? e / k : 1)) % e);
    return t;
  }

 private:
  // Values [b, e) of the tensor `name`: the chunks they fall in are generated (a chunk's draws
  // before b discarded), so they are the values get() gives at those indices.
  std::vector<float> values(const std::string& name, int64_t b, int64_t e, double lo, double hi) {
    constexpr int64_t kChunk = int64_t{1} << 16;
    const uint64_t base = seed_ ^ fnv1a(name);
    std::vector<float> v(e - b);
    const int64_t first = b / kChunk, chunks = (e + kChunk - 1) / kChunk - first;
    auto fill = [&](int64_t c0, int64_t c1) {
      for (int64_t ch = first + c0; ch < first + c1; ++ch) {
        Rng rng(base + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(ch));
        for (int64_t i = ch * kChunk; i < std::min(e, (ch + 1) * kChunk); ++i) {
          const double u = rng.uniform();
          if (i >= b) v[i - b] = static_cast<float>(lo + (hi - lo) * u);
        }
      }
    };
    if (pool_ != nullptr && chunks > 1)
      pool_->parallel_for(chunks, 1, fill);
    else if (chunks > 0)
      fill(0, chunks);
    return v;
  }

  const DeepseekV4Config& c_;
  uint64_t seed_;
  ThreadPool* pool_;
};

class RefFeed final : public Feed {
 public:
  explicit RefFeed(const dsv4::ModelWeights& w) : w_(w) {
    auto add = [&](const std::string& n, const std::vector<double>& v) { m_[n] = &v; };
    add("embed", w.embed);
    add("head", w.head);
    add("norm", w.norm);
    add("hc_head_fn", w.hc_head_fn);
    add("hc_head_base", w.hc_head_base);
    add("hc_head_scale", w.hc_head_scale);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const std::string L = "layers." + std::to_string(l) + ".";
      const dsv4::BlockWeights& b = w.layers[l];
      const dsv4::AttnWeights& a = b.attn;
      add(L + "attn_norm", b.attn_norm);
      add(L + "ffn_norm", b.ffn_norm);
      add(L + "hc_attn_fn", b.hc_attn_fn);
      add(L + "hc_attn_base", b.hc_attn_base);
      add(L + "hc_attn_scale", b.hc_attn_scale);
      add(L + "hc_ffn_fn", b.hc_ffn_fn);
      add(L + "hc_ffn_base", b.hc_ffn_base);
      add(L + "hc_ffn_scale", b.hc_ffn_scale);
      add(L + "attn.wq_a", a.wq_a);
      add(L + "attn.q_norm", a.q_norm);
      add(L + "attn.wq_b", a.wq_b);
      add(L + "attn.wkv", a.wkv);
      add(L + "attn.kv_norm", a.kv_norm);
      add(L + "attn.attn_sink", a.attn_sink);
      add(L + "attn.wo_a", a.wo_a);
      add(L + "attn.wo_b", a.wo_b);
      add(L + "attn.compressor.wkv", a.c_wkv);
      add(L + "attn.compressor.wgate", a.c_wgate);
      add(L + "attn.compressor.ape", a.c_ape);
      add(L + "attn.compressor.norm", a.c_norm);
      add(L + "attn.indexer.wq_b", a.i_wq_b);
      add(L + "attn.indexer.weights_proj", a.i_weights);
      add(L + "attn.indexer.compressor.wkv", a.i_c_wkv);
      add(L + "attn.indexer.compressor.wgate", a.i_c_wgate);
      add(L + "attn.indexer.compressor.ape", a.i_c_ape);
      add(L + "attn.indexer.compressor.norm", a.i_c_norm);
      add(L + "ffn.gate", b.ffn.gate);
      add(L + "ffn.gate.bias", b.ffn.bias);
      add(L + "ffn.shared_experts.w1", b.ffn.shared_w1);
      add(L + "ffn.shared_experts.w3", b.ffn.shared_w3);
      add(L + "ffn.shared_experts.w2", b.ffn.shared_w2);
    }
  }
  std::vector<float> get(const std::string& name, int64_t count, double, double) override {
    auto it = m_.find(name);
    STRATA_CHECK(it != m_.end()) << name;
    STRATA_CHECK(static_cast<int64_t>(it->second->size()) == count)
        << name << " has " << it->second->size() << " values, expected " << count;
    return {it->second->begin(), it->second->end()};
  }
  void expert(int64_t layer, int64_t e, int which, int64_t, int64_t, std::vector<uint8_t>* q,
              std::vector<uint8_t>* s) override {
    const dsv4::MoeWeights& f = w_.layers[layer].ffn;
    *q = which == 1 ? f.w1[e] : which == 3 ? f.w3[e] : f.w2[e];
    *s = which == 1 ? f.w1_scale[e] : which == 3 ? f.w3_scale[e] : f.w2_scale[e];
  }
  std::vector<int32_t> tid2eid(int64_t layer) override { return w_.layers[layer].ffn.tid2eid; }

 private:
  const dsv4::ModelWeights& w_;
  std::map<std::string, const std::vector<double>*> m_;
};

// A checkpoint in the Hugging Face DeepSeek-V4 layout (dsv4::checkpoint_tensors) through a
// WeightSource: the feed's names are the checkpoint's without ".weight" (norms, linears,
// ffn.gate) or as they are (hc_*, attn_sink, ape, ffn.gate.bias). Float tensors (F32, F16, BF16)
// are read as they are; F8_E4M3 ones times their `.scale` block scales (weight_block_size of
// quantization_config; e8m0 bytes, F8_E8M0, or F32), or handed over as e4m3 rows (fp8_rows()).
// Routed experts are MXFP4: I8/U8 [n, k/2] (element 2j in the low nibble, as the published
// float4_e2m1fn_x2 and dsv4::quantize_mxfp4 pack it: no conversion) and e8m0 scales [n, k/32]
// (F8_E8M0, or F32 powers of two), passed through. tid2eid is I64 or I32. mtp.* is not read.
class CheckpointFeed final : public Feed {
 public:
  CheckpointFeed(const DeepseekV4Config& c, WeightSource& src)
      : c_(c), src_(src), shapes_(checkpoint_shapes(c)) {}

  Status status() const override { return status_; }

  std::vector<float> get(const std::string& name, int64_t count, double, double) override {
    std::vector<float> v(count, 0.0f);
    if (status_.ok()) note(read_floats(checkpoint_name(name), v));
    return v;
  }

  // Only rows [r0, r1) are read (WeightSource::get_rows: a view of the mapping, whose other
  // pages are never touched) and dequantized; the whole tensor where a row range cannot be read.
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1, int64_t n, int64_t k,
                          double lo, double hi) override {
    if (r0 == 0 && r1 == n) return get(name, n * k, lo, hi);
    std::vector<float> v((r1 - r0) * k, 0.0f);
    if (status_.ok()) note(read_floats(checkpoint_name(name), v, r0, r1));
    return v;
  }

  void expert(int64_t layer, int64_t e, int which, int64_t n, int64_t k, std::vector<uint8_t>* q,
              std::vector<uint8_t>* s) override {
    q->assign(n * k / 2, 0);
    s->assign(n * k / dsv4::kMxfp4Group, 127);
    if (!status_.ok()) return;
    const std::string base = "layers." + std::to_string(layer) + ".ffn.experts." +
                             std::to_string(e) + ".w" + std::to_string(which);
    note(read_expert(base, n, k, q, s));
  }

  std::vector<int32_t> tid2eid(int64_t layer) override {
    std::vector<int32_t> t(c_.vocab_size * c_.num_experts_per_tok, 0);
    if (status_.ok())
      note(read_tid2eid("layers." + std::to_string(layer) + ".ffn.gate.tid2eid", t));
    return t;
  }

  Status fp8_rows(const std::string& name, int64_t r0, int64_t r1, std::vector<uint8_t>* q,
                  std::vector<float>* scales) override {
    const std::string w = checkpoint_name(name);
    STRATA_ASSIGN_OR_RETURN(const std::vector<int64_t>* shape, shape_of(w));
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src_.get(w, *shape));
    if (t.dtype != DType::kF8E4M3)
      return invalid_argument(w + " in " + src_.describe() + " is " + dtype_name(t.dtype) +
                              ", expected F8_E4M3 as the other parts of its matmul");
    const int64_t n = (*shape)[0], k = (*shape)[1];
    STRATA_ASSIGN_OR_RETURN(std::vector<float> blocks, block_scales(w, n, k));
    const int64_t nbk = fp8_block_count(k, c_.weight_block_k);
    q->assign(reinterpret_cast<const uint8_t*>(t.data) + r0 * k,
              reinterpret_cast<const uint8_t*>(t.data) + r1 * k);
    scales->resize((r1 - r0) * nbk);
    for (int64_t r = r0; r < r1; ++r)
      std::copy_n(&blocks[(r / c_.weight_block_n) * nbk], nbk, &(*scales)[(r - r0) * nbk]);
    src_.release(t);
    return Status();
  }

  // The checkpoint name of a feed name.
  static std::string checkpoint_name(const std::string& name) {
    const size_t dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    if (last.rfind("hc_", 0) == 0 || last == "attn_sink" || last == "ape" || last == "bias")
      return name;
    return name + ".weight";
  }

 private:
  void note(Status s) {
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }
  Result<const std::vector<int64_t>*> shape_of(const std::string& name) const {
    auto it = shapes_.find(name);
    if (it == shapes_.end())
      return internal_error("DeepSeek-V4: no tensor " + name + " in the checkpoint layout");
    return &it->second;
  }
  Status unsupported(const io::TensorRef& t, const std::string& want) const {
    return unimplemented(t.name + " in " + src_.describe() + " has dtype " + dtype_name(t.dtype) +
                         ", which DeepSeek-V4 does not load (expected " + want + ")");
  }
  // The f32 block scales of the e4m3 tensor `weight` ([n, k]): its sibling `.scale`,
  // [ceil(n / block_n), ceil(k / block_k)] e8m0 bytes (F8_E8M0) or f32.
  Result<std::vector<float>> block_scales(const std::string& weight, int64_t n, int64_t k) {
    const std::string name = weight.substr(0, weight.size() - 7) + ".scale";
    const std::vector<int64_t> shape = {fp8_block_count(n, c_.weight_block_n),
                                        fp8_block_count(k, c_.weight_block_k)};
    if (!src_.has(name))
      return not_found(weight + " is F8_E4M3 but its block scales " + name + " are not in " +
                       src_.describe());
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src_.get(name, shape));
    std::vector<float> s(shape[0] * shape[1]);
    const auto* b = reinterpret_cast<const uint8_t*>(t.data);
    if (t.dtype == DType::kU8 || t.dtype == DType::kI8) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (b[i] == 0xff)
          return data_loss(name + " holds an e8m0 NaN (0xff) at " + std::to_string(i));
        s[i] = std::ldexp(1.0f, static_cast<int>(b[i]) - 127);
      }
    } else if (t.dtype == DType::kF32) {
      std::memcpy(s.data(), t.data, s.size() * 4);
      for (size_t i = 0; i < s.size(); ++i)
        if (!(s[i] > 0) || !std::isfinite(s[i]))
          return data_loss(name + ": block scale " + std::to_string(i) + " is " +
                           std::to_string(s[i]) + ", not a positive finite number");
    } else {
      return unsupported(t, "F8_E8M0 or F32 block scales");
    }
    src_.release(t);
    return s;
  }
  // The tensor's values, or (r1 >= 0) only its rows [r0, r1): a row view of the source when it
  // gives one (WeightSource::get_rows), else the whole tensor's rows.
  Status read_floats(const std::string& name, std::vector<float>& out, int64_t r0 = 0,
                     int64_t r1 = -1) {
    STRATA_ASSIGN_OR_RETURN(const std::vector<int64_t>* shape, shape_of(name));
    const bool part = r1 >= 0 && !shape->empty() && !(r0 == 0 && r1 == (*shape)[0]);
    io::TensorRef t;
    int64_t first = 0;  // the row of the tensor at t.data
    if (part) {
      auto rows = src_.get_rows(name, *shape, r0, r1);
      if (rows.ok()) {
        t = std::move(rows).value();
        first = r0;
      } else if (rows.status().code() == StatusCode::kUnimplemented) {
        STRATA_ASSIGN_OR_RETURN(t, src_.get(name, *shape));  // rows not on whole blocks
      } else {
        return rows.status();
      }
    } else {
      STRATA_ASSIGN_OR_RETURN(t, src_.get(name, *shape));
    }
    const int64_t row = shape->empty() ? 1 : t.numel() / std::max<int64_t>(1, t.shape[0]);
    const int64_t lo = part ? r0 : 0, hi = part ? r1 : (shape->empty() ? 1 : (*shape)[0]);
    if ((hi - lo) * row != static_cast<int64_t>(out.size()))
      return internal_error(name + ": " + std::to_string((hi - lo) * row) +
                            " values, the model needs " + std::to_string(out.size()));
    const std::byte* data = t.data + dtype_bytes(t.dtype, (lo - first) * row);
    if (t.dtype == DType::kF8E4M3 && shape->size() == 2) {
      const int64_t n = (*shape)[0], k = (*shape)[1];
      STRATA_ASSIGN_OR_RETURN(std::vector<float> s, block_scales(name, n, k));
      const int64_t nbk = fp8_block_count(k, c_.weight_block_k);
      const auto* q = reinterpret_cast<const uint8_t*>(data);
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t j = 0; j < k; ++j)
          out[(r - lo) * k + j] = fp8_e4m3_to_f32(q[(r - lo) * k + j]) *
                                  s[(r / c_.weight_block_n) * nbk + j / c_.weight_block_k];
    } else if (t.dtype == DType::kF32 || t.dtype == DType::kF16 || t.dtype == DType::kBF16) {
      dequantize_row(t.dtype, data, out.data(), (hi - lo) * row);
    } else {
      return unsupported(t, "BF16, F16 or F32, or a 2-D F8_E4M3 weight with its .scale");
    }
    src_.release(t);
    return Status();
  }
  Status read_expert(const std::string& base, int64_t n, int64_t k, std::vector<uint8_t>* q,
                     std::vector<uint8_t>* s) {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef w, src_.get(base + ".weight", {n, k / 2}));
    if (w.dtype != DType::kI8 && w.dtype != DType::kU8)
      return unsupported(w, "I8 or U8 packed MXFP4 (expert_dtype fp4)");
    std::memcpy(q->data(), w.data, q->size());
    src_.release(w);
    STRATA_ASSIGN_OR_RETURN(io::TensorRef sc,
                            src_.get(base + ".scale", {n, k / dsv4::kMxfp4Group}));
    if (sc.dtype == DType::kU8 || sc.dtype == DType::kI8) {
      std::memcpy(s->data(), sc.data, s->size());
    } else if (sc.dtype == DType::kF32) {
      std::vector<float> f(s->size());
      std::memcpy(f.data(), sc.data, f.size() * 4);
      STRATA_RETURN_IF_ERROR(dsv4::f32_scales_to_e8m0(f.data(), static_cast<int64_t>(f.size()),
                                                      base + ".scale", s->data()));
    } else {
      return unsupported(sc, "F8_E8M0 or F32 MXFP4 scales");
    }
    for (size_t i = 0; i < s->size(); ++i)
      if ((*s)[i] == 0xff)
        return data_loss(base + ".scale holds an e8m0 NaN (0xff) at " + std::to_string(i));
    src_.release(sc);
    return Status();
  }
  Status read_tid2eid(const std::string& name, std::vector<int32_t>& out) {
    STRATA_ASSIGN_OR_RETURN(const std::vector<int64_t>* shape, shape_of(name));
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src_.get(name, *shape));
    const int64_t n = t.numel();
    if (t.dtype == DType::kI64) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, t.data + 8 * i, 8);
        out[i] = v < 0 || v > std::numeric_limits<int32_t>::max() ? -1 : static_cast<int32_t>(v);
      }
    } else if (t.dtype == DType::kI32) {
      std::memcpy(out.data(), t.data, 4 * n);
    } else {
      return unsupported(t, "I64 or I32");
    }
    src_.release(t);
    return Status();
  }

  const DeepseekV4Config& c_;
  WeightSource& src_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  Status status_;
};

struct Expert {
  std::vector<uint8_t> w1, w1s, w3, w3s, w2, w2s;
};

struct LayerWeights {
  int ratio = 0;
  std::vector<double> inv_freq;
  std::vector<float> attn_norm, ffn_norm, q_norm, kv_norm, sink, c_ape, c_norm, i_c_ape, i_c_norm;
  std::vector<float> hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  PackedWeight wq_a, wq_b, wkv, comp, icomp, i_wq_b, i_weights, gate, shared_w13;
  RowSplitLinear wo_b, shared_w2;
  std::vector<PackedWeight> wo_a;  // this rank's groups
  std::vector<float> bias;
  std::vector<int32_t> tid2eid;
  std::vector<Expert> experts;  // this rank's: expert Split::experts.begin + i
};

// ------------------------------------------------------------------------------ the model

class DeepseekV4Model final : public Model {
 public:
  DeepseekV4Model(ModelConfig config, DeepseekV4Config c, DType storage, WorkspaceLimits limits,
                  ThreadPool* pool, const ModelParallel& par)
      : Model(std::move(config)),
        c_(std::move(c)),
        storage_(storage),
        limits_(limits),
        pool_(pool),
        par_(par),
        sp_(split_of(c_, par)),
        d_(dims_of(c_, limits, pool->size(), sp_)) {}

  // fp8: the matmuls packed from the checkpoint's e4m3 rows (Feed::fp8_rows); null: none.
  Status load(Feed& feed, const Fp8Linears* fp8 = nullptr);

  KvSpec kv_spec() const override { return deepseek_v4_kv_spec(c_); }
  Status forward(const ForwardBatch& batch, std::span<const PagedKvLayer> kv, const KernelOps& ops,
                 float* logits) override;
  Status compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                        float* logits) override;
  Status hidden_states(std::span<const int32_t> rows, bool final_norm, const KernelOps& ops,
                       float* out) override;
  Status allocate_state(int64_t num_slots, DType kv_dtype, DeviceAllocator* allocator) override;

  int64_t weight_bytes_per_token() const override;
  double forward_flops(int64_t num_tokens, int64_t sum_context,
                       int64_t num_logit_rows) const override;
  int64_t weight_bytes_total() const override {
    return weight_bytes(c_, storage_, sp_, &fp8_).total();
  }
  int64_t parameter_count() const override;
  int64_t workspace_bytes() const override { return workspace_bytes_for(d_); }
  DType weight_dtype() const override { return storage_; }
  std::vector<LinearInfo> linear_layers() const override;

 private:
  void embed_row(int32_t token, float* out) const {
    dequantize_row(
        storage_,
        embed_.data() + (token - sp_.vocab.begin) * c_.hidden_size * dtype_block_bytes(storage_),
        out, c_.hidden_size);
  }
  std::byte* slot(int32_t s) const { return state_.data() + s * state_.bytes; }
  Status embed(const ForwardBatch& b);
  Status attention_layer(int64_t l, const ForwardBatch& b, const PagedKvLayer& kvl,
                         const KernelOps& ops);
  Status moe_layer(int64_t l, const ForwardBatch& b, const KernelOps& ops);
  Status routed_experts_parallel(const LayerWeights& W, const KernelOps& ops);
  Status head_rows(std::span<const int32_t> rows, bool final_norm, const KernelOps& ops, float* out,
                   bool logits);

  DeepseekV4Config c_;
  DType storage_;
  WorkspaceLimits limits_;
  ThreadPool* pool_;
  ModelParallel par_;
  Split sp_;
  Dims d_;
  std::vector<LayerWeights> layers_;
  std::vector<float> norm_, hc_head_fn_, hc_head_base_, hc_head_scale_, ones_;
  RowSplitLinear head_;
  std::vector<std::byte> embed_;  // this rank's rows Split::vocab
  Fp8Linears fp8_;                // the matmuls kept FP8 (checkpoint loads)
  std::vector<float> ws_f_;
  std::vector<int32_t> ws_i_;
  Workspace w_{};
  int64_t last_tokens_ = 0;

  struct State {
    DeviceBuffer buffer;
    std::vector<std::byte> host;
    std::byte* data() const {
      return buffer.empty() ? const_cast<std::byte*>(host.data()) : buffer.data();
    }
    int64_t bytes = 0, slots = 0;
    DType dtype = DType::kF32;
    StateLayout layout;
  } state_;
};

Result<PackedWeight> pack_f32(const std::vector<float>& v, int64_t n, int64_t k, DType storage) {
  return PackedWeight::pack(v.data(), DType::kF32, n, k, storage);
}

Status DeepseekV4Model::load(Feed& feed, const Fp8Linears* fp8) {
  if (fp8 != nullptr) fp8_ = *fp8;
  const int64_t dim = c_.hidden_size, hc = c_.hc_mult, mix = c_.hc_mix_dim();
  const int64_t h = c_.num_attention_heads, hd = c_.head_dim, ql = c_.q_lora_rank;
  const int64_t sh = shared_dim(c_), inter = c_.moe_intermediate_size;
  const int64_t group_in = h * hd / c_.o_groups;
  auto mat = [&](const std::string& name, int64_t n, int64_t k) {
    const double a = std::sqrt(3.0 / static_cast<double>(k));
    return feed.get(name, n * k, -a, a);
  };
  // The matmul `plan` of rows [begin, end) of each of the feed matrices `parts` [rows_i, k],
  // stacked: their e4m3 rows and scales when the plan is kept FP8, else only those rows of the
  // parts' float values (Feed::rows; dummy range +-a, a 0: +-sqrt(3 / k)) packed at storage_.
  // Every row packs to the same values as in the whole weight (a rank's slice under tensor
  // parallelism).
  struct Part {
    std::string name;
    int64_t rows;
    int64_t begin = 0, end = -1;  // end -1: to the last row
    double a = 0;
    int64_t last() const { return end < 0 ? rows : end; }
  };
  auto lin = [&](const std::string& plan, const std::vector<Part>& parts,
                 int64_t k) -> Result<PackedWeight> {
    int64_t n = 0;
    for (const Part& p : parts) n += p.last() - p.begin;
    if (fp8_.plans.count(plan) == 0) {
      const double def = std::sqrt(3.0 / static_cast<double>(k));
      std::vector<float> kept;
      if (parts.size() > 1) kept.reserve(n * k);
      for (const Part& p : parts) {
        const double a = p.a > 0 ? p.a : def;
        std::vector<float> v = feed.rows(p.name, p.begin, p.last(), p.rows, k, -a, a);
        if (parts.size() == 1)
          kept = std::move(v);
        else
          kept.insert(kept.end(), v.begin(), v.end());
      }
      return pack_f32(kept, n, k, storage_);
    }
    std::vector<std::vector<uint8_t>> q(parts.size());
    std::vector<std::vector<float>> sc(parts.size());
    std::vector<PackedWeight::Fp8Part> fp;
    for (size_t i = 0; i < parts.size(); ++i) {
      STRATA_RETURN_IF_ERROR(
          feed.fp8_rows(parts[i].name, parts[i].begin, parts[i].last(), &q[i], &sc[i]));
      fp.push_back({q[i].data(), DType::kF8E4M3, parts[i].last() - parts[i].begin, sc[i].data()});
    }
    return PackedWeight::pack_fp8_rows(fp.data(), static_cast<int>(fp.size()), k, 1, fp8_.block_k);
  };
  // The [n, k] weight `name` split by output rows over the ranks (RowSplitLinear; whole for one
  // process).
  auto row_split = [&](const std::string& plan, const std::string& name, int64_t n,
                       int64_t k) -> Result<RowSplitLinear> {
    if (par_.tp_size <= 1) {
      STRATA_ASSIGN_OR_RETURN(PackedWeight w, lin(plan, {{name, n}}, k));
      return RowSplitLinear::split(std::move(w), par_);
    }
    const ShardRange r = row_split_rows(n, par_.tp_size, par_.tp_rank);
    STRATA_ASSIGN_OR_RETURN(PackedWeight mine, lin(plan, {{name, n, r.begin, r.end}}, k));
    return RowSplitLinear::from_shard(std::move(mine), n, par_);
  };
  {  // this rank's vocab rows only
    const int64_t rows = sp_.vocab.size();
    std::vector<float> e =
        feed.rows("embed", sp_.vocab.begin, sp_.vocab.end, c_.vocab_size, dim, -1.0, 1.0);
    embed_.resize(rows * dim * dtype_block_bytes(storage_));
    quantize_row(storage_, e.data(), embed_.data(), rows * dim);
  }
  STRATA_ASSIGN_OR_RETURN(head_, row_split("lm_head", "head", c_.vocab_size, dim));
  norm_ = feed.get("norm", dim, 0.8, 1.2);
  hc_head_fn_ = feed.get("hc_head_fn", hc * hc * dim, -0.1, 0.1);
  hc_head_base_ = feed.get("hc_head_base", hc, -1.0, 1.0);
  hc_head_scale_ = feed.get("hc_head_scale", 1, 0.5, 1.5);
  ones_.assign(std::max(hd, c_.index_head_dim), 1.0f);
  const double gate_a = 2.0 / std::sqrt(static_cast<double>(dim));
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    const std::string L = "layers." + std::to_string(l) + ".";
    LayerWeights W;
    W.ratio = c_.compress_ratio(l);
    W.inv_freq = dsv4::layer_rope_inv_freq(c_, l);
    const int64_t coff = W.ratio == 4 ? 2 : 1;
    W.attn_norm = feed.get(L + "attn_norm", dim, 0.8, 1.2);
    W.ffn_norm = feed.get(L + "ffn_norm", dim, 0.8, 1.2);
    W.hc_attn_fn = feed.get(L + "hc_attn_fn", mix * hc * dim, -0.1, 0.1);
    W.hc_attn_base = feed.get(L + "hc_attn_base", mix, -1.0, 1.0);
    W.hc_attn_scale = feed.get(L + "hc_attn_scale", 3, 0.5, 1.5);
    W.hc_ffn_fn = feed.get(L + "hc_ffn_fn", mix * hc * dim, -0.1, 0.1);
    W.hc_ffn_base = feed.get(L + "hc_ffn_base", mix, -1.0, 1.0);
    W.hc_ffn_scale = feed.get(L + "hc_ffn_scale", 3, 0.5, 1.5);
    STRATA_ASSIGN_OR_RETURN(W.wq_a, lin(L + "attn.wq_a", {{L + "attn.wq_a", ql}}, dim));
    W.q_norm = feed.get(L + "attn.q_norm", ql, 0.8, 1.2);
    STRATA_ASSIGN_OR_RETURN(
        W.wq_b, lin(L + "attn.wq_b",
                    {{L + "attn.wq_b", h * hd, sp_.h0() * hd, (sp_.h0() + sp_.heads()) * hd}}, ql));
    STRATA_ASSIGN_OR_RETURN(W.wkv, lin(L + "attn.wkv", {{L + "attn.wkv", hd}}, dim));
    W.kv_norm = feed.get(L + "attn.kv_norm", hd, 0.8, 1.2);
    {
      const std::vector<float> sink = feed.get(L + "attn.attn_sink", h, -1.0, 1.0);
      W.sink.assign(sink.begin() + sp_.h0(), sink.begin() + sp_.h0() + sp_.heads());
    }
    if (fp8_.plans.count(L + "attn.wo_a.0") != 0) {
      // FP8: each of this rank's groups with its own rows' block scales.
      std::vector<uint8_t> q;
      std::vector<float> sc;
      for (int64_t g = sp_.groups.begin; g < sp_.groups.end; ++g) {
        STRATA_RETURN_IF_ERROR(
            feed.fp8_rows(L + "attn.wo_a", g * c_.o_lora_rank, (g + 1) * c_.o_lora_rank, &q, &sc));
        const PackedWeight::Fp8Part part{q.data(), DType::kF8E4M3, c_.o_lora_rank, sc.data()};
        STRATA_ASSIGN_OR_RETURN(PackedWeight p,
                                PackedWeight::pack_fp8_rows(&part, 1, group_in, 1, fp8_.block_k));
        W.wo_a.push_back(std::move(p));
      }
    } else {
      // This rank's groups' rows only.
      const int64_t olr = c_.o_lora_rank;
      const double a = std::sqrt(3.0 / static_cast<double>(group_in));
      const std::vector<float> wo_a =
          feed.rows(L + "attn.wo_a", sp_.groups.begin * olr, sp_.groups.end * olr,
                    c_.o_groups * olr, group_in, -a, a);
      for (int64_t g = sp_.groups.begin; g < sp_.groups.end; ++g) {
        STRATA_ASSIGN_OR_RETURN(
            PackedWeight p,
            PackedWeight::pack(wo_a.data() + (g - sp_.groups.begin) * olr * group_in, DType::kF32,
                               olr, group_in, storage_));
        W.wo_a.push_back(std::move(p));
      }
    }
    const int64_t ul = c_.o_groups * c_.o_lora_rank;
    STRATA_ASSIGN_OR_RETURN(W.wo_b, row_split(L + "attn.wo_b", L + "attn.wo_b", dim, ul));
    if (W.ratio != 0) {
      const int64_t width = coff * hd;
      STRATA_ASSIGN_OR_RETURN(W.comp, lin(L + "attn.compressor.wkv_wgate",
                                          {{L + "attn.compressor.wkv", width},
                                           {L + "attn.compressor.wgate", width, 0, -1, gate_a}},
                                          dim));
      W.c_ape = feed.get(L + "attn.compressor.ape", W.ratio * width, -1.0, 1.0);
      W.c_norm = feed.get(L + "attn.compressor.norm", hd, 0.8, 1.2);
    }
    if (W.ratio == 4) {
      const int64_t id = c_.index_head_dim, ih = c_.index_n_heads;
      const std::string ic = L + "attn.indexer.compressor.";
      STRATA_ASSIGN_OR_RETURN(
          W.icomp, lin(ic + "wkv_wgate",
                       {{ic + "wkv", 2 * id}, {ic + "wgate", 2 * id, 0, -1, gate_a}}, dim));
      W.i_c_ape = feed.get(L + "attn.indexer.compressor.ape", 4 * 2 * id, -1.0, 1.0);
      W.i_c_norm = feed.get(L + "attn.indexer.compressor.norm", id, 0.8, 1.2);
      const std::string iq = L + "attn.indexer.wq_b", iw = L + "attn.indexer.weights_proj";
      STRATA_ASSIGN_OR_RETURN(W.i_wq_b, lin(iq, {{iq, ih * id}}, ql));
      STRATA_ASSIGN_OR_RETURN(W.i_weights, lin(iw, {{iw, ih}}, dim));
    }
    STRATA_ASSIGN_OR_RETURN(W.gate, pack_f32(mat(L + "ffn.gate", c_.n_routed_experts, dim),
                                             c_.n_routed_experts, dim, DType::kF32));
    if (c_.hash_routed(l)) {
      W.tid2eid = feed.tid2eid(l);
      STRATA_RETURN_IF_ERROR(feed.status());
      STRATA_RETURN_IF_ERROR(dsv4::check_hash_table(W.tid2eid.data(), c_.vocab_size,
                                                    static_cast<int>(c_.num_experts_per_tok),
                                                    static_cast<int>(c_.n_routed_experts)));
    } else {
      W.bias = feed.get(L + "ffn.gate.bias", c_.n_routed_experts, -0.1, 0.1);
    }
    if (sh > 0) {
      // This rank's rows of w1 then the same rows of w3 (all of both for one process).
      const std::string se = L + "ffn.shared_experts.";
      const ShardRange r = sp_.shared;
      STRATA_ASSIGN_OR_RETURN(
          W.shared_w13,
          lin(L + "moe.shared.w1_w3",
              {{se + "w1", sh, r.begin, r.end}, {se + "w3", sh, r.begin, r.end}}, dim));
      STRATA_ASSIGN_OR_RETURN(W.shared_w2, row_split(L + "moe.shared.w2", se + "w2", dim, sh));
    }
    W.experts.resize(sp_.experts.size());
    for (int64_t e = sp_.experts.begin; e < sp_.experts.end; ++e) {
      Expert& X = W.experts[e - sp_.experts.begin];
      feed.expert(l, e, 1, inter, dim, &X.w1, &X.w1s);
      feed.expert(l, e, 3, inter, dim, &X.w3, &X.w3s);
      feed.expert(l, e, 2, dim, inter, &X.w2, &X.w2s);
    }
    STRATA_RETURN_IF_ERROR(feed.status());
    layers_.push_back(std::move(W));
  }
  STRATA_RETURN_IF_ERROR(feed.status());
  auto [nf, ni] = plan_workspace(d_, nullptr, nullptr, nullptr);
  ws_f_.assign(nf, 0.0f);
  ws_i_.assign(ni, 0);
  plan_workspace(d_, &w_, ws_f_.data(), ws_i_.data());
  return Status();
}

Status DeepseekV4Model::allocate_state(int64_t num_slots, DType kv_dtype,
                                       DeviceAllocator* allocator) {
  STRATA_RETURN_IF_ERROR(check_kv_dtype(c_, kv_dtype));
  if (num_slots < 1) return invalid_argument("DeepSeek-V4 needs at least one state slot");
  state_.layout = state_layout(c_, kv_dtype);
  state_.bytes = state_.layout.bytes;
  state_.slots = num_slots;
  state_.dtype = kv_dtype;
  const size_t total = static_cast<size_t>(state_.bytes * num_slots);
  state_.buffer.reset();
  state_.host.clear();
  if (allocator != nullptr) {
    STRATA_ASSIGN_OR_RETURN(state_.buffer, allocator->allocate(total, MemoryUse::kKvCache));
    std::memset(state_.buffer.data(), 0, total);
  } else {
    state_.host.assign(total, std::byte{0});
  }
  return Status();
}

// Clears one layer's state as a sequence at position 0 has it: zero ring and kv, -inf scores.
void clear_layer_state(const StateLayout::Layer& L, int64_t ring_bytes, std::byte* s) {
  std::memset(s + L.ring, 0, ring_bytes);
  auto clear = [&](int64_t off, int64_t floats) {
    float* kv = reinterpret_cast<float*>(s + off);
    std::fill(kv, kv + floats, 0.0f);
    std::fill(kv + floats, kv + 2 * floats, -std::numeric_limits<float>::infinity());
  };
  if (L.comp >= 0) clear(L.comp, L.comp_floats);
  if (L.icomp >= 0) clear(L.icomp, L.icomp_floats);
}

// One compressor step of the token at `pos` (as AttentionDecoder::Compressor::push): kv/score
// rows [2 * width] (kv then score, before ape) into the pending state; when the window
// completes, the pooled row (normed, roped) into `row`, returning true.
bool compressor_push(float* state, int64_t state_floats, int ratio, int64_t out_dim,
                     const float* kvsc, const float* ape, const float* norm, float eps,
                     int64_t rope_dim, const double* inv_freq, int64_t pos, float* row) {
  const bool overlap = ratio == 4;
  const int64_t coff = overlap ? 2 : 1, width = coff * out_dim;
  float* kv_state = state;
  float* score_state = state + state_floats;
  const int64_t slot = (overlap ? ratio : 0) + pos % ratio;
  std::copy(kvsc, kvsc + width, kv_state + slot * width);
  float* sc = score_state + slot * width;
  for (int64_t ch = 0; ch < width; ++ch)
    sc[ch] = kvsc[width + ch] + ape[(pos % ratio) * width + ch];
  if ((pos + 1) % ratio != 0) return false;
  const int64_t n = coff * ratio;
  for (int64_t ch = 0; ch < out_dim; ++ch) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t e = 0; e < n; ++e) {
      const int64_t off = (overlap && e >= ratio) ? out_dim : 0;
      mx = std::max(mx, score_state[e * width + off + ch]);
    }
    float num = 0, den = 0;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t off = (overlap && e >= ratio) ? out_dim : 0;
      const float p = std::exp(score_state[e * width + off + ch] - mx);
      num += p * kv_state[e * width + off + ch];
      den += p;
    }
    row[ch] = num / den;
  }
  if (overlap) {
    std::copy(kv_state + ratio * width, kv_state + 2 * ratio * width, kv_state);
    std::copy(score_state + ratio * width, score_state + 2 * ratio * width, score_state);
  }
  double ss = 0;
  for (int64_t i = 0; i < out_dim; ++i) ss += static_cast<double>(row[i]) * row[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / out_dim + eps));
  for (int64_t i = 0; i < out_dim; ++i) row[i] = row[i] * inv * norm[i];
  dsv4::rope_interleaved(row + out_dim - rope_dim, rope_dim, pos + 1 - ratio, inv_freq, false);
  return true;
}

Status DeepseekV4Model::attention_layer(int64_t l, const ForwardBatch& b, const PagedKvLayer& kvl,
                                        const KernelOps& ops) {
  const LayerWeights& W = layers_[l];
  // h: this rank's heads (all of them for one process).
  const int64_t n = b.num_tokens(), dim = d_.dim, h = d_.hl, hd = d_.hd, rd = d_.rd, ql = d_.ql;
  const int64_t win = d_.win, id = d_.id, ih = d_.ih;
  const int hc = static_cast<int>(d_.hc), iters = static_cast<int>(c_.hc_sinkhorn_iters);
  const float eps = static_cast<float>(c_.rms_norm_eps), hc_eps = static_cast<float>(c_.hc_eps);
  ThreadPool& pool = *pool_;
  const int ratio = W.ratio;
  const int64_t coff = ratio == 4 ? 2 : 1, width = coff * hd;
  const KvCodec codec = codec_for(c_, state_.dtype);
  const StateLayout::Layer& SL = state_.layout.layers[l];
  const int64_t bs = kvl.block_size;
  const int64_t rows_per_block = ratio != 0 ? bs / ratio : 0;
  const int64_t main_bytes = codec.main_region_bytes(rows_per_block);

  dsv4::hc_pre(w_.streams, n, hc, dim,
               {W.hc_attn_fn.data(), W.hc_attn_base.data(), W.hc_attn_scale.data()}, iters, hc_eps,
               eps, w_.x, w_.post, w_.comb, &pool);
  ops.rms_norm(w_.x, dim, W.attn_norm.data(), eps, n, dim, w_.x, dim, pool);
  ops.matmul(w_.x, n, dim, W.wq_a, w_.qr, ql, pool);
  ops.rms_norm(w_.qr, ql, W.q_norm.data(), eps, n, ql, w_.qr, ql, pool);
  ops.matmul(w_.qr, n, ql, W.wq_b, w_.q, h * hd, pool);
  ops.rms_norm(w_.q, hd, ones_.data(), eps, n * h, hd, w_.q, hd, pool);
  ops.matmul(w_.x, n, dim, W.wkv, w_.kv_raw, hd, pool);
  ops.rms_norm(w_.kv_raw, hd, W.kv_norm.data(), eps, n, hd, w_.kv_raw, hd, pool);
  if (ratio != 0) ops.matmul(w_.x, n, dim, W.comp, w_.cw, 2 * width, pool);
  if (ratio == 4) {
    ops.matmul(w_.x, n, dim, W.icomp, w_.icw, 4 * id, pool);
    ops.matmul(w_.qr, n, ql, W.i_wq_b, w_.iq, ih * id, pool);
    ops.matmul(w_.x, n, dim, W.i_weights, w_.iw, ih, pool);
  }
  // RoPE of q (every head), the window row, the indexer queries; the window rows as the ring
  // will hold them (encoded and decoded at the KV dtype).
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    // One encoded row, in this thread's attention scratch (unused until phase B).
    std::byte* tmp = reinterpret_cast<std::byte*>(w_.scratch + ThreadPool::current_thread_index() *
                                                                   d_.scratch_floats());
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = b.positions[t];
      for (int64_t hh = 0; hh < h; ++hh)
        dsv4::rope_interleaved(w_.q + (t * h + hh) * hd + hd - rd, rd, p, W.inv_freq.data(), false);
      float* kr = w_.kv_raw + t * hd;
      dsv4::rope_interleaved(kr + hd - rd, rd, p, W.inv_freq.data(), false);
      codec.put_main(tmp, 1, 0, kr);
      codec.get_main(tmp, 1, 0, w_.kv + t * hd);
      if (ratio == 4)
        for (int64_t hh = 0; hh < ih; ++hh)
          dsv4::rope_interleaved(w_.iq + (t * ih + hh) * id + id - rd, rd, p, W.inv_freq.data(),
                                 false);
    }
  });

  // Phase A, per sequence in position order: the compressors (complete rows to the paged
  // blocks) and the snapshots of this layer's state.
  auto row_block = [&](int s, int64_t r) -> std::byte* {
    const int64_t logical = r * ratio / bs;
    const int64_t physical = b.block_tables[s * b.max_blocks_per_seq + logical];
    return kvl.raw + physical * kvl.raw_block_bytes;
  };
  const int64_t ring_bytes = codec.main_region_bytes(win);
  std::vector<float> row(std::max(hd, id));
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int64_t q0 = b.query_start[s], q1 = b.query_start[s + 1];
    if (q1 == q0) continue;
    const int64_t p0 = b.positions[q0];
    std::byte* st = slot(b.state_slots[s]);
    auto snapshot = [&](int64_t boundary) {
      for (const ForwardBatch::StateSnapshot& snap : b.state_snapshots) {
        if (snap.seq != s || snap.boundary != boundary) continue;
        std::byte* dst = slot(snap.dst_slot);
        // The window rows before the boundary: older ones from the ring, this step's from the
        // raw rows.
        std::memcpy(dst + SL.ring, st + SL.ring, ring_bytes);
        for (int64_t j = std::max<int64_t>(p0, boundary - win); j < boundary; ++j)
          codec.put_main(dst + SL.ring, win, j % win, w_.kv_raw + (q0 + j - p0) * hd);
        if (SL.comp >= 0) std::memcpy(dst + SL.comp, st + SL.comp, 2 * SL.comp_floats * 4);
        if (SL.icomp >= 0) std::memcpy(dst + SL.icomp, st + SL.icomp, 2 * SL.icomp_floats * 4);
      }
    };
    for (int64_t t = q0; t < q1; ++t) {
      const int64_t p = b.positions[t];
      snapshot(p);
      if (ratio == 0) continue;
      if (compressor_push(reinterpret_cast<float*>(st + SL.comp), SL.comp_floats, ratio, hd,
                          w_.cw + t * 2 * width, W.c_ape.data(), W.c_norm.data(), eps, rd,
                          W.inv_freq.data(), p, row.data())) {
        const int64_t r = (p + 1) / ratio - 1;
        codec.put_main(row_block(s, r), rows_per_block, ((r * ratio) % bs) / ratio, row.data());
      }
      if (ratio == 4 &&
          compressor_push(reinterpret_cast<float*>(st + SL.icomp), SL.icomp_floats, 4, id,
                          w_.icw + t * 4 * id, W.i_c_ape.data(), W.i_c_norm.data(), eps, rd,
                          W.inv_freq.data(), p, row.data())) {
        const int64_t r = (p + 1) / 4 - 1;
        codec.put_idx(row_block(s, r) + main_bytes, ((r * 4) % bs) / 4, row.data());
      }
    }
    snapshot(b.positions[q1 - 1] + 1);
  }

  // Phase B: every token's attention (window rows from the ring and this step's rows, the
  // compressed rows complete at its position, the indexer's choice on CSA layers, the sinks).
  const float softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const float iscale =
      ratio == 4 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(id) * ih)) : 0.0f;
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    const int th = ThreadPool::current_thread_index();
    float* keys = w_.scratch + th * d_.scratch_floats();
    const int64_t max_keys = win + d_.max_comp_keys();
    float* logit = keys + round_up(max_keys * hd, kAlign);
    float* score = logit + round_up(max_keys, kAlign);
    float* tmp = score + round_up(d_.max_idx_rows(), kAlign);
    int32_t* order = w_.iscratch + th * d_.scratch_ints();
    for (int64_t t = t0; t < t1; ++t) {
      int s = 0;
      while (b.query_start[s + 1] <= t) ++s;
      const int64_t q0 = b.query_start[s], p0 = b.positions[q0], p = b.positions[t];
      const std::byte* st = slot(b.state_slots[s]);
      int64_t nk = 0;
      for (int64_t j = std::max<int64_t>(0, p - win + 1); j <= p; ++j, ++nk) {
        if (j >= p0)
          std::copy(w_.kv + (q0 + j - p0) * hd, w_.kv + (q0 + j - p0 + 1) * hd, keys + nk * hd);
        else
          codec.get_main(ops, st + SL.ring, win, j % win, keys + nk * hd);
      }
      if (ratio == 128) {
        const int64_t visible = (p + 1) / ratio;
        for (int64_t r = 0; r < visible; ++r, ++nk)
          codec.get_main(ops, row_block(s, r), rows_per_block, ((r * ratio) % bs) / ratio,
                         keys + nk * hd);
      } else if (ratio == 4) {
        const int64_t visible = (p + 1) / 4;
        const float* iq = w_.iq + t * ih * id;
        const float* iw = w_.iw + t * ih;
        if (codec.fp8()) {
          // The fp8 keys straight from the blocks (kernels/dsv4.h).
          thread_local std::vector<const uint8_t*> key_rows;
          key_rows.resize(visible);
          for (int64_t r = 0; r < visible; ++r) {
            key_rows[r] = reinterpret_cast<const uint8_t*>(row_block(s, r) + main_bytes) +
                          ((r * 4) % bs) / 4 * codec.idx_row_bytes();
            order[r] = static_cast<int32_t>(r);
          }
          dsv4_indexer_scores(ops, iq, iw, static_cast<int>(ih), id, iscale, key_rows.data(),
                              visible, score, &pool);
        } else {
          for (int64_t r = 0; r < visible; ++r) {
            codec.get_idx(row_block(s, r) + main_bytes, ((r * 4) % bs) / 4, tmp);
            float sc = 0;
            for (int64_t hh = 0; hh < ih; ++hh) {
              float dot = 0;
              for (int64_t i = 0; i < id; ++i) dot += iq[hh * id + i] * tmp[i];
              sc += std::max(dot, 0.0f) * iw[hh] * iscale;
            }
            score[r] = sc;
            order[r] = static_cast<int32_t>(r);
          }
        }
        const int64_t k = std::min<int64_t>(c_.index_topk, visible);
        std::partial_sort(order, order + k, order + visible, [&](int32_t a, int32_t c) {
          return score[a] > score[c] || (score[a] == score[c] && a < c);
        });
        for (int64_t i = 0; i < k; ++i, ++nk) {
          const int64_t r = order[i];
          codec.get_main(ops, row_block(s, r), rows_per_block, ((r * 4) % bs) / 4, keys + nk * hd);
        }
      }
      // (A decode step's one token: its heads split over the pool; otherwise tokens are.)
      dsv4_attention(ops, w_.q + t * h * hd, static_cast<int>(h), hd, keys, nk, W.sink.data(),
                     softmax_scale, w_.o + t * h * hd, &pool);
      for (int64_t hh = 0; hh < h; ++hh)
        dsv4::rope_interleaved(w_.o + (t * h + hh) * hd + hd - rd, rd, p, W.inv_freq.data(), true);
    }
  });

  // Phase C: this step's newest window rows into the ring.
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int64_t q0 = b.query_start[s], q1 = b.query_start[s + 1];
    if (q1 == q0) continue;
    const int64_t p0 = b.positions[q0], pl = b.positions[q1 - 1];
    std::byte* st = slot(b.state_slots[s]);
    for (int64_t j = std::max(p0, pl + 1 - win); j <= pl; ++j)
      codec.put_main(st + SL.ring, win, j % win, w_.kv_raw + (q0 + j - p0) * hd);
  }

  // Grouped low-rank O (this rank's groups; the ranks' groups all-gathered side by side), then
  // wo_b (split by output rows), then back into the streams.
  const int64_t group_in = d_.h * hd / d_.G, ul = d_.G * d_.olr;
  const int64_t groups = static_cast<int64_t>(W.wo_a.size());
  if (!sp_.split()) {
    for (int64_t g = 0; g < groups; ++g)
      ops.matmul(w_.o + g * group_in, n, h * hd, W.wo_a[g], w_.u + g * d_.olr, ul, pool);
  } else {
    const int64_t lw = sp_.max_group_width();
    for (int64_t g = 0; g < groups; ++g)
      ops.matmul(w_.o + g * group_in, n, h * hd, W.wo_a[g], w_.tp + g * d_.olr, lw, pool);
    STRATA_RETURN_IF_ERROR(
        gather_columns(*sp_.comm, w_.tp, lw, n, sp_.group_widths, w_.u, ul, w_.tp));
  }
  STRATA_RETURN_IF_ERROR(W.wo_b.forward(w_.u, n, ul, w_.out, dim, ops, pool, w_.tp));
  dsv4::hc_post(w_.out, w_.streams, w_.post, w_.comb, n, hc, dim, w_.streams, &pool);
  return ok_status();
}

Status DeepseekV4Model::moe_layer(int64_t l, const ForwardBatch& b, const KernelOps& ops) {
  const LayerWeights& W = layers_[l];
  const int64_t n = b.num_tokens(), dim = d_.dim, E = d_.E, k = d_.k, inter = d_.inter, sh = d_.sh;
  const int hc = static_cast<int>(d_.hc), iters = static_cast<int>(c_.hc_sinkhorn_iters);
  const float eps = static_cast<float>(c_.rms_norm_eps), hc_eps = static_cast<float>(c_.hc_eps);
  const float limit = static_cast<float>(c_.swiglu_limit);
  ThreadPool& pool = *pool_;
  dsv4::hc_pre(w_.streams, n, hc, dim,
               {W.hc_ffn_fn.data(), W.hc_ffn_base.data(), W.hc_ffn_scale.data()}, iters, hc_eps,
               eps, w_.x, w_.post, w_.comb, &pool);
  ops.rms_norm(w_.x, dim, W.ffn_norm.data(), eps, n, dim, w_.x, dim, pool);
  ops.matmul(w_.x, n, dim, W.gate, w_.rl, E, pool);
  const dsv4::RoutingConfig rc = dsv4::routing_config(c_);
  const bool hash = c_.hash_routed(l);
  for (int64_t t = 0; t < n; ++t)
    dsv4::route_token(rc, w_.rl + t * E, hash || W.bias.empty() ? nullptr : W.bias.data(),
                      hash ? &W.tid2eid[static_cast<int64_t>(b.token_ids[t]) * k] : nullptr,
                      w_.ids + t * k, w_.rw + t * k);
  if (sh > 0) {
    if (!sp_.split()) {
      ops.matmul(w_.x, n, dim, W.shared_w13, w_.gu, 2 * sh, pool);
    } else {
      // This rank's rows of w1 and w3, gathered into whole [gate | up] rows.
      const int64_t w = sp_.shared.size();
      if (w > 0) ops.matmul(w_.x, n, dim, W.shared_w13, w_.tp_local, 2 * w, pool);
      STRATA_RETURN_IF_ERROR(gather_column_parts(*sp_.comm, w_.tp_local, 2 * w, n, sp_.shared_rows,
                                                 2, w_.gu, 2 * sh, sh, w_.tp));
    }
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        dsv4::swiglu_clamped(w_.gu + t * 2 * sh, w_.gu + t * 2 * sh + sh, sh, limit,
                             w_.act + t * sh);
    });
    STRATA_RETURN_IF_ERROR(W.shared_w2.forward(w_.act, n, sh, w_.out, dim, ops, pool, w_.tp));
  } else {
    std::fill(w_.out, w_.out + n * dim, 0.0f);
  }
  // Token slots (t * k + i) grouped by expert (counting sort, in slot order).
  int32_t* count = w_.expert_count;
  std::fill(count, count + E + 1, 0);
  for (int64_t j = 0; j < n * k; ++j) ++count[w_.ids[j] + 1];
  for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
  {
    std::vector<int32_t> fill(count, count + E);  // small: E entries
    for (int64_t j = 0; j < n * k; ++j) w_.expert_rows[fill[w_.ids[j]]++] = static_cast<int32_t>(j);
  }
  if (sp_.split()) {
    STRATA_RETURN_IF_ERROR(routed_experts_parallel(W, ops));
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const int64_t m = count[e + 1] - count[e];
      if (m == 0) continue;
      const int32_t* rows = w_.expert_rows + count[e];
      for (int64_t r = 0; r < m; ++r)
        std::copy(w_.x + (rows[r] / k) * dim, w_.x + (rows[r] / k + 1) * dim, w_.xg + r * dim);
      const Expert& X = W.experts[e];
      mxfp4_matmul(ops, w_.xg, X.w1.data(), X.w1s.data(), m, inter, dim, w_.eg, &pool);
      mxfp4_matmul(ops, w_.xg, X.w3.data(), X.w3s.data(), m, inter, dim, w_.eu, &pool);
      dsv4::swiglu_clamped(w_.eg, w_.eu, m * inter, limit, w_.eg);
      mxfp4_matmul(ops, w_.eg, X.w2.data(), X.w2s.data(), m, dim, inter, w_.eo, &pool);
      for (int64_t r = 0; r < m; ++r)
        std::copy(w_.eo + r * dim, w_.eo + (r + 1) * dim, w_.expert_out + rows[r] * dim);
    }
  }
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t i = 0; i < k; ++i) {
        const float wgt = w_.rw[t * k + i];
        const float* eo = w_.expert_out + (t * k + i) * dim;
        float* o = w_.out + t * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += wgt * eo[d];
      }
  });
  dsv4::hc_post(w_.out, w_.streams, w_.post, w_.comb, n, hc, dim, w_.streams, &pool);
  return ok_status();
}

// The routed experts under tensor parallelism (Split): this rank runs its experts over the
// (token, slot) entries routed to them, grouped as moe_layer() groups them (w_.expert_count /
// expert_rows: by expert, in slot order). Rank r's outputs are the grouped entries of its experts
// in order, rows [count[first expert of r], count[its end]); the ranks all-gather them and every
// rank puts each output at its slot in expert_out, as one process does, for the same combine.
Status DeepseekV4Model::routed_experts_parallel(const LayerWeights& W, const KernelOps& ops) {
  const int64_t dim = d_.dim, E = d_.E, k = d_.k, inter = d_.inter;
  const float limit = static_cast<float>(c_.swiglu_limit);
  ThreadPool& pool = *pool_;
  const int32_t* count = w_.expert_count;
  const int size = sp_.size;
  std::vector<int64_t> first(size + 1, 0);
  for (int r = 0; r < size; ++r) first[r + 1] = shard_range(E, size, r).end;
  int64_t rows = 0;
  for (int r = 0; r < size; ++r)
    rows = std::max<int64_t>(rows, count[first[r + 1]] - count[first[r]]);
  if (rows == 0) return ok_status();
  float* send = w_.tp;
  float* recv = w_.tp + rows * dim;
  const int32_t base = count[sp_.experts.begin];
  for (int64_t e = sp_.experts.begin; e < sp_.experts.end; ++e) {
    const int64_t m = count[e + 1] - count[e];
    if (m == 0) continue;
    const int32_t* slots = w_.expert_rows + count[e];
    for (int64_t r = 0; r < m; ++r)
      std::copy(w_.x + (slots[r] / k) * dim, w_.x + (slots[r] / k + 1) * dim, w_.xg + r * dim);
    const Expert& X = W.experts[e - sp_.experts.begin];
    mxfp4_matmul(ops, w_.xg, X.w1.data(), X.w1s.data(), m, inter, dim, w_.eg, &pool);
    mxfp4_matmul(ops, w_.xg, X.w3.data(), X.w3s.data(), m, inter, dim, w_.eu, &pool);
    dsv4::swiglu_clamped(w_.eg, w_.eu, m * inter, limit, w_.eg);
    mxfp4_matmul(ops, w_.eg, X.w2.data(), X.w2s.data(), m, dim, inter,
                 send + (count[e] - base) * dim, &pool);
  }
  STRATA_RETURN_IF_ERROR(all_gather_floats(*sp_.comm, send, rows * dim, recv));
  for (int r = 0; r < size; ++r) {
    const float* block = recv + r * rows * dim;
    for (int64_t j = count[first[r]]; j < count[first[r + 1]]; ++j)
      std::copy(block + (j - count[first[r]]) * dim, block + (j - count[first[r]] + 1) * dim,
                w_.expert_out + w_.expert_rows[j] * dim);
  }
  return ok_status();
}

Status DeepseekV4Model::forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv,
                                const KernelOps& ops, float* logits) {
  const int64_t n = b.num_tokens();
  if (n == 0) return Status();
  if (n > d_.n)
    return invalid_argument("batch of " + std::to_string(n) + " tokens exceeds the workspace (" +
                            std::to_string(d_.n) + ")");
  if (static_cast<int64_t>(b.logits_rows.size()) > d_.R)
    return invalid_argument("too many logits rows: " + std::to_string(b.logits_rows.size()));
  if (static_cast<int64_t>(kv.size()) != c_.num_hidden_layers)
    return invalid_argument("DeepSeek-V4 forward needs one KV layer per model layer (" +
                            std::to_string(c_.num_hidden_layers) + "), got " +
                            std::to_string(kv.size()));
  if (state_.slots == 0) return failed_precondition("DeepSeek-V4 forward before allocate_state()");
  if (static_cast<int>(b.state_slots.size()) != b.num_seqs())
    return invalid_argument("DeepSeek-V4 forward needs one state slot per sequence");
  for (int s = 0; s < b.num_seqs(); ++s) {
    if (b.state_slots[s] < 0 || b.state_slots[s] >= state_.slots)
      return invalid_argument("state slot " + std::to_string(b.state_slots[s]) + " out of range");
    const int64_t q0 = b.query_start[s], q1 = b.query_start[s + 1];
    if (q1 > q0 && b.positions[q1 - 1] >= d_.max_seq)
      return invalid_argument("position " + std::to_string(b.positions[q1 - 1]) +
                              " beyond max_seq_len " + std::to_string(d_.max_seq));
  }
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    const PagedKvLayer& k = kv[l];
    const int64_t want = layer_block_bytes(c_, l, k.block_size, state_.dtype);
    if (want == 0) continue;
    if (k.raw == nullptr || k.raw_block_bytes != want || k.dtype != state_.dtype ||
        k.block_size % deepseek_v4_kv_spec(c_).block_size_multiple != 0)
      return invalid_argument("DeepSeek-V4 layer " + std::to_string(l) +
                              " needs raw paged KV blocks of " + std::to_string(want) +
                              " bytes at " + dtype_name(state_.dtype) +
                              " (KvSpec::layer_block_bytes)");
  }
  for (int64_t t = 0; t < n; ++t)
    if (b.token_ids[t] < 0 || b.token_ids[t] >= c_.vocab_size)
      return invalid_argument("token id " + std::to_string(b.token_ids[t]) +
                              " outside the vocabulary (" + std::to_string(c_.vocab_size) + ")");
  auto bad_slot = [&](int32_t x) { return x < 0 || x >= state_.slots; };
  for (const ForwardBatch::StateCopy& r : b.state_restores)
    if (bad_slot(r.src_slot) || bad_slot(r.dst_slot))
      return invalid_argument("state restore between slots out of range");
  for (const ForwardBatch::StateSnapshot& sn : b.state_snapshots)
    if (bad_slot(sn.dst_slot) || sn.seq < 0 || sn.seq >= b.num_seqs())
      return invalid_argument("state snapshot of a sequence or into a slot out of range");
  for (const ForwardBatch::StateCopy& r : b.state_restores)
    std::memcpy(slot(r.dst_slot), slot(r.src_slot), state_.bytes);
  const KvCodec codec = codec_for(c_, state_.dtype);
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int64_t q0 = b.query_start[s];
    if (b.query_start[s + 1] > q0 && b.positions[q0] == 0)
      for (const StateLayout::Layer& L : state_.layout.layers)
        clear_layer_state(L, codec.main_region_bytes(d_.win), slot(b.state_slots[s]));
  }
  STRATA_RETURN_IF_ERROR(embed(b));
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    STRATA_RETURN_IF_ERROR(attention_layer(l, b, kv[l], ops));
    STRATA_RETURN_IF_ERROR(moe_layer(l, b, ops));
  }
  last_tokens_ = n;
  if (!b.logits_rows.empty())
    STRATA_RETURN_IF_ERROR(head_rows(b.logits_rows, true, ops, logits, true));
  return Status();
}

// Every token's embedding into its hc_mult streams. Tensor parallel: each rank looks up the
// tokens of its vocabulary rows (zeros for the others), the ranks all-gather them and every
// token's row is taken from the rank that holds it.
Status DeepseekV4Model::embed(const ForwardBatch& b) {
  const int64_t n = b.num_tokens(), dim = d_.dim, hc = d_.hc;
  const float* rows = nullptr;
  if (sp_.split()) {
    float* send = w_.tp;
    float* recv = w_.tp + n * dim;
    for (int64_t t = 0; t < n; ++t) {
      if (b.token_ids[t] >= sp_.vocab.begin && b.token_ids[t] < sp_.vocab.end)
        embed_row(b.token_ids[t], send + t * dim);
      else
        std::fill(send + t * dim, send + (t + 1) * dim, 0.0f);
    }
    STRATA_RETURN_IF_ERROR(all_gather_floats(*sp_.comm, send, n * dim, recv));
    rows = recv;
  }
  for (int64_t t = 0; t < n; ++t) {
    float* h = w_.streams + t * hc * dim;
    if (rows == nullptr) {
      embed_row(b.token_ids[t], h);
    } else {
      int owner = 0;
      while (owner + 1 < sp_.size &&
             b.token_ids[t] >= shard_range(c_.vocab_size, sp_.size, owner).end)
        ++owner;
      std::copy(rows + (owner * n + t) * dim, rows + (owner * n + t + 1) * dim, h);
    }
    for (int64_t j = 1; j < hc; ++j) std::copy(h, h + dim, h + j * dim);
  }
  return ok_status();
}

Status DeepseekV4Model::head_rows(std::span<const int32_t> rows, bool final_norm,
                                  const KernelOps& ops, float* out, bool logits) {
  const int64_t m = static_cast<int64_t>(rows.size()), dim = d_.dim, hc = d_.hc;
  for (int64_t r = 0; r < m; ++r)
    std::copy(w_.streams + rows[r] * hc * dim, w_.streams + (rows[r] + 1) * hc * dim,
              w_.head_in + r * hc * dim);
  float* y = logits ? w_.head_y : out;
  dsv4::hc_head(w_.head_in, m, static_cast<int>(hc), dim,
                {hc_head_fn_.data(), hc_head_base_.data(), hc_head_scale_.data()},
                static_cast<float>(c_.hc_eps), static_cast<float>(c_.rms_norm_eps), y, pool_);
  if (final_norm)
    ops.rms_norm(y, dim, norm_.data(), static_cast<float>(c_.rms_norm_eps), m, dim, y, dim, *pool_);
  // Tensor parallel: each rank's vocabulary panels, all-gathered (every rank samples alike).
  if (logits) return head_.forward(y, m, dim, out, d_.vocab, ops, *pool_, w_.tp);
  return ok_status();
}

Status DeepseekV4Model::compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                                       float* logits) {
  if (static_cast<int64_t>(rows.size()) > d_.R)
    return invalid_argument("too many logits rows: " + std::to_string(rows.size()));
  for (int32_t r : rows)
    if (r < 0 || r >= last_tokens_) return invalid_argument("logits row out of range");
  return head_rows(rows, true, ops, logits, true);
}

Status DeepseekV4Model::hidden_states(std::span<const int32_t> rows, bool final_norm,
                                      const KernelOps& ops, float* out) {
  if (static_cast<int64_t>(rows.size()) > d_.R)
    return invalid_argument("too many hidden-state rows: " + std::to_string(rows.size()));
  for (int32_t r : rows)
    if (r < 0 || r >= last_tokens_) return invalid_argument("hidden-state row out of range");
  // The hc_head collapse of the streams (before or after the final norm).
  return head_rows(rows, final_norm, ops, out, false);
}

// This rank's (under tensor parallelism its slices, and its expected share of the top-k experts).
int64_t DeepseekV4Model::weight_bytes_per_token() const {
  int64_t bytes = 0;
  for (const MatmulPlan& m : matmul_plan(c_, sp_))
    if (!m.expert) bytes += plan_bytes(m, storage_, &fp8_);
  bytes += c_.num_hidden_layers * c_.num_experts_per_tok * 3 *
           mxfp4_bytes(c_.moe_intermediate_size, c_.hidden_size) * sp_.experts.size() /
           std::max<int64_t>(c_.n_routed_experts, 1);
  return bytes;
}

int64_t DeepseekV4Model::parameter_count() const {
  int64_t p = 0;
  for (const MatmulPlan& m : matmul_plan(c_, sp_)) p += m.rows * m.cols;
  p += sp_.vocab.size() * c_.hidden_size;
  const WeightBytesByClass b = weight_bytes(c_, storage_, sp_, &fp8_);
  return p + b.other / 4;
}

double DeepseekV4Model::forward_flops(int64_t num_tokens, int64_t sum_context,
                                      int64_t num_logit_rows) const {
  double f = 0;
  // This rank's: its slices, its share of the routed experts and of the heads.
  for (const MatmulPlan& m : matmul_plan(c_, sp_)) {
    if (m.name == "lm_head") continue;
    if (!m.expert) f += 2.0 * m.rows * m.cols * num_tokens;
  }
  // Routed experts: top-k of them per token.
  f += 2.0 * num_tokens * c_.num_hidden_layers * c_.num_experts_per_tok * 3 *
       c_.moe_intermediate_size * c_.hidden_size * sp_.experts.size() /
       std::max<int64_t>(c_.n_routed_experts, 1);
  f += 2.0 * num_logit_rows * row_split_rows(c_.vocab_size, sp_.size, sp_.rank).size() *
       c_.hidden_size;
  // Attention: per token and layer, window rows + the compressed rows it reads (CSA: top-k and
  // every indexer key; HCA: every complete row), q.k and p.v over all heads.
  const double ctx = num_tokens > 0 ? static_cast<double>(sum_context) / num_tokens : 0;
  const double per_key = 4.0 * sp_.heads() * c_.head_dim;
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    double keys = std::min<double>(ctx, c_.sliding_window);
    const int r = c_.compress_ratio(l);
    if (r == 128) keys += std::floor(ctx / 128);
    if (r == 4) {
      keys += std::min<double>(c_.index_topk, std::floor(ctx / 4));
      f += num_tokens * std::floor(ctx / 4) * 2.0 * c_.index_n_heads * c_.index_head_dim;
    }
    f += num_tokens * keys * per_key;
  }
  return f;
}

std::vector<LinearInfo> DeepseekV4Model::linear_layers() const {
  std::vector<LinearInfo> out;
  for (const MatmulPlan& m : matmul_plan(c_, sp_))
    out.push_back({m.name, m.rows, m.cols, plan_dtype(m, storage_, &fp8_), m.sharding,
                   plan_bytes(m, storage_, &fp8_)});
  return out;
}

Result<DeepseekV4Config> v4_config(const ModelConfig& config) {
  if (config.raw == nullptr)
    return invalid_argument("DeepSeek-V4 needs its config.json (no raw config)");
  return dsv4::parse_deepseek_v4_config(*config.raw, nullptr);
}

Result<DType> v4_storage(const ModelBuildOptions& o) {
  if (o.layer_storage)
    return unimplemented(std::string("--quantization ") + dtype_name(*o.layer_storage) +
                         " is not supported for DeepSeek-V4 yet (its routed experts are MXFP4; "
                         "the other matmuls run at --dtype)");
  const DType s = o.storage.value_or(DType::kBF16);
  if (s != DType::kF32 && s != DType::kF16 && s != DType::kBF16)
    return invalid_argument(std::string("DeepSeek-V4 runs its matmuls at f32, f16 or bf16, not ") +
                            dtype_name(s));
  return s;
}

Status v4_checks(const DeepseekV4Config& c, const ModelBuildOptions& o) {
  if (o.parallel.pp_size > 1)
    return unimplemented(
        "DeepSeek-V4 does not run under pipeline parallelism yet: use --pipeline-parallel-size 1 "
        "(--tensor-parallel-size N, with or without --enable-expert-parallel, splits it exactly)");
  if (o.parallel.tp_size > 1 && o.parallel.tp_size > c.o_groups)
    return invalid_argument("DeepSeek-V4 splits its " + std::to_string(c.o_groups) +
                            " o_groups (groups of attention heads) over the tensor-parallel "
                            "ranks: use --tensor-parallel-size " +
                            std::to_string(c.o_groups) + " or less, not " +
                            std::to_string(o.parallel.tp_size));
  if (o.parallel.tp_size > 1 && c.num_attention_heads % c.o_groups != 0)
    return unimplemented(
        "DeepSeek-V4 under tensor parallelism splits whole groups of heads: "
        "num_attention_heads must divide by o_groups");
  if (o.mtp_module)
    return unimplemented(
        "the DeepSeek-V4 multi-token-prediction module is not an engine model "
        "yet (dsv4::MtpDecoder is its reference)");
  if (c.expert_dtype != dsv4::ExpertDtype::kFp4)
    return unimplemented(
        "DeepSeek-V4 with expert_dtype other than fp4 is not supported yet "
        "(routed experts run as MXFP4)");
  if (c.num_attention_heads * c.head_dim % c.o_groups != 0)
    return invalid_argument("DeepSeek-V4: num_attention_heads * head_dim must divide by o_groups");
  return Status();
}

ModelConfig model_config_of(const DeepseekV4Config& c) {
  ModelConfig m;
  m.architecture = "DeepseekV4ForCausalLM";
  m.model_type = "deepseek_v4";
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.num_hidden_layers = c.num_hidden_layers;
  m.num_attention_heads = c.num_attention_heads;
  m.num_key_value_heads = 1;
  m.head_dim = c.head_dim;
  m.rms_norm_eps = c.rms_norm_eps;
  m.max_position_embeddings = c.max_position_embeddings;
  return m;
}

}  // namespace

KvSpec deepseek_v4_kv_spec(const DeepseekV4Config& c) {
  KvSpec k;
  k.num_layers = c.num_hidden_layers;
  k.num_kv_heads = 1;
  k.head_dim = c.head_dim;
  k.has_v = false;
  bool hca = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) hca |= c.compress_ratio(l) == 128;
  k.block_size_multiple = hca ? 128 : 4;
  k.layer_block_bytes = [c](int64_t layer, int64_t block_size, DType dtype) {
    return layer_block_bytes(c, layer, block_size, dtype);
  };
  k.state_bytes_per_slot = [c](DType dtype) { return state_layout(c, dtype).bytes; };
  // One decode token at a context of n reads, per layer, its window rows (the ring), and per
  // CSA layer the indexer-picked compressed rows and every indexer key, per HCA layer every
  // compressed row (an fp8 row: its 576 data and 8 scale bytes).
  k.decode_read_bytes = [c](DType dtype, int64_t n) {
    const KvCodec codec = codec_for(c, dtype);
    // An fp8 row: the published layout's (check_kv_dtype refuses fp8 caches without one).
    const Result<int64_t> fp8_row = dsv4::kv_token_bytes_fp8(c.head_dim, c.qk_rope_head_dim);
    const int64_t row =
        codec.fp8() ? (fp8_row.ok() ? *fp8_row : 0) : c.head_dim * dtype_block_bytes(dtype);
    int64_t bytes = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      bytes += std::min(n, c.sliding_window) * row;
      const int ratio = c.compress_ratio(l);
      if (ratio == 4)
        bytes += std::min(n / 4, c.index_topk) * row + (n / 4) * codec.idx_row_bytes();
      if (ratio == 128) bytes += (n / 128) * row;
    }
    return bytes;
  };
  k.describe = [c](DType dtype, int64_t block_size, int64_t context_len) {
    return describe_kv(c, dtype, block_size, context_len);
  };
  return k;
}

Result<std::unique_ptr<Model>> make_deepseek_v4_model(const DeepseekV4Config& c,
                                                      const dsv4::ModelWeights& w, DType storage,
                                                      const WorkspaceLimits& limits,
                                                      ThreadPool* pool) {
  if (pool == nullptr) return invalid_argument("DeepSeek-V4 needs a thread pool");
  auto m = std::make_unique<DeepseekV4Model>(model_config_of(c), c, storage, limits, pool,
                                             ModelParallel{});
  RefFeed feed(w);
  STRATA_RETURN_IF_ERROR(m->load(feed));
  return std::unique_ptr<Model>(std::move(m));
}

Result<std::unique_ptr<Model>> create_deepseek_v4_model(const ModelConfig& config,
                                                        std::unique_ptr<WeightSource> weights,
                                                        const ModelBuildOptions& options) {
  if (options.pool == nullptr) return invalid_argument("DeepSeek-V4 needs a thread pool");
  STRATA_ASSIGN_OR_RETURN(DeepseekV4Config c, v4_config(config));
  STRATA_RETURN_IF_ERROR(v4_checks(c, options));
  STRATA_ASSIGN_OR_RETURN(DType storage, v4_storage(options));
  if (options.parallel.tp_size > 1 &&
      (options.parallel.tp == nullptr || options.parallel.tp->size() != options.parallel.tp_size))
    return invalid_argument("DeepSeek-V4: tensor parallel size " +
                            std::to_string(options.parallel.tp_size) +
                            " without its group of ranks");
  auto m = std::make_unique<DeepseekV4Model>(config, c, storage, options.limits, options.pool,
                                             options.parallel);
  if (weights->describe() == "dummy weights") {
    DummyFeed feed(c, options.seed, options.pool);
    STRATA_RETURN_IF_ERROR(m->load(feed));
  } else {
    // A checkpoint in the Hugging Face V4 layout; its e4m3 matmuls stay FP8.
    STRATA_ASSIGN_OR_RETURN(Fp8Linears fp8, fp8_linears(c, *weights));
    CheckpointFeed feed(c, *weights);
    STRATA_RETURN_IF_ERROR(m->load(feed, &fp8));
    STRATA_LOG(INFO) << "DeepSeek-V4 checkpoint: " << fp8.plans.size()
                     << " matmuls kept FP8 (e4m3, " << c.weight_block_k
                     << "-column block scales), the others at " << dtype_name(storage)
                     << ", routed experts MXFP4"
                     << (c.num_nextn_predict_layers > 0 ? "; mtp.* (the MTP layer) not loaded"
                                                        : "");
  }
  return std::unique_ptr<Model>(std::move(m));
}

Result<ModelMemoryEstimate> estimate_deepseek_v4_model(const ModelConfig& config,
                                                       WeightSource& weights,
                                                       const ModelBuildOptions& options,
                                                       int threads) {
  STRATA_ASSIGN_OR_RETURN(DeepseekV4Config c, v4_config(config));
  STRATA_RETURN_IF_ERROR(v4_checks(c, options));
  STRATA_ASSIGN_OR_RETURN(DType storage, v4_storage(options));
  ModelMemoryEstimate e;
  const Split sp = split_of(c, options.parallel);
  Fp8Linears fp8;
  if (weights.describe() != "dummy weights") {
    STRATA_ASSIGN_OR_RETURN(fp8, fp8_linears(c, weights));
  }
  e.weights = weight_bytes(c, storage, sp, &fp8);
  e.workspace_bytes = workspace_bytes_for(dims_of(c, options.limits, threads, sp));
  e.kv_spec = deepseek_v4_kv_spec(c);
  return e;
}

}  // namespace strata
