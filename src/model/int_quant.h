// AWQ, GPTQ and compressed-tensors checkpoints: Hugging Face safetensors directories whose
// config.json has a quantization_config with quant_method "awq", "gptq" or "compressed-tensors"
// (format "pack-quantized", integer weights only; see below). Each quantized linear layer `<name>`
// ships `<name>.qweight`, `<name>.qzeros`, `<name>.scales` (and for GPTQ `<name>.g_idx`) instead of
// `<name>.weight`; the value of output row o, input column c is
//     w[o][c] = scales[g][o] * (q[c][o] - zero[g][o]),  g = the group of c
// with f16 scales. Packings, int32 words filled from the low bits up:
//   AWQ (AutoAWQ "gemm", what vLLM's awq reads): qweight [in, out/8], eight 4-bit codes of
//     outputs 8j..8j+7 per word, output 8j + kAwqOrder[i] in nibble i; qzeros [in/G, out/8] the
//     same; scales [in/G, out]. Groups are contiguous (g = c / G).
//   GPTQ (AutoGPTQ, vLLM's gptq): qweight [in*bits/32, out], 32/bits codes of consecutive
//     inputs per word (input c in word c/(32/bits), slot c%(32/bits)); qzeros [in/G,
//     out*bits/32] packed the same way along outputs; scales [in/G, out]; g_idx [in] the group
//     of each input. The "v1" format (checkpoint_format "gptq", the default) stores zero - 1,
//     read back as stored + 1 (so a stored 2^bits - 1 means 2^bits, as vLLM's kernels read it);
//     "gptq_v2" stores the zero itself. bits 4 or 8.
// G = group_size, or the whole row for -1.
//
// compressed-tensors "pack-quantized" (llm-compressor's W4A16 / W8A16, vLLM's
// compressed_tensors_wNa16): `<name>.weight_packed` int32 [out, ceil(in/(32/bits))], 32/bits
// codes of consecutive inputs per word from the low bits up (input c in word c/(32/bits), slot
// c%(32/bits)), the tail word zero-padded; `<name>.weight_scale` [out, in/G] (f16, bf16 or f32;
// [out, 1] for strategy "channel"); `<name>.weight_zero_point` (asymmetric only) int32
// [ceil(out/(32/bits)), in/G] packed the same way along outputs; `<name>.weight_shape` [2] the
// unpacked [out, in]; `<name>.weight_g_idx` [in] with actorder. The codes are signed (q in
// [-2^(bits-1), 2^(bits-1))) stored with 2^(bits-1) added, zero points too, so
//     w = scale * (q - zp) = scale * (stored_q - stored_zp),  stored_zp = 2^(bits-1) when symmetric
// which is the unsigned AWQ/GPTQ form above. Scales are held as f16: a bf16 or f32 scale that
// f16 cannot hold exactly sends the layer to the exact F32 fallback below. Layers listed in
// `ignore` (lm_head) are plain float tensors in the file and stay float.
//
// Loading maps them onto the integer kernels exactly (PackedWeight W4G/W8G): every value is the
// checkpoint's. GPTQ with act-order (desc_act, a g_idx that is not c / G) has non-contiguous
// groups, which the panel layout cannot hold: such weights (and any whose group size is not a
// multiple of 32) are dequantized exactly to F32 storage instead, with a log line saying so.
// Embeddings, norms and (unless quantized in the file) lm_head stay float, as in the checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/packed_weight.h"

namespace strata {

class WeightSource;

// quantization_config of an AWQ, GPTQ or compressed-tensors (pack-quantized) checkpoint.
struct IntQuantization {
  std::string method;           // "awq", "gptq" or "compressed-tensors"
  int bits = 4;                 // AWQ: 4; GPTQ, compressed-tensors: 4 or 8
  int64_t group_size = 128;     // -1: one group per row
  bool sym = false;             // GPTQ: symmetric (informational: zeros are read from qzeros);
                                // compressed-tensors: no weight_zero_point (zero = 2^(bits-1))
  bool desc_act = false;        // GPTQ act-order: groups follow g_idx
  bool zeros_plus_one = false;  // GPTQ v1 checkpoint format: stored zero = zero - 1
  // compressed-tensors: the scheme also quantizes input activations (e.g. W4A8); Strata runs it
  // weight-only, the activations stay float.
  bool activations_quantized = false;
  // AWQ/GPTQ quantization_config.modules_to_not_convert: layers whose path contains one of these
  // stay float in the checkpoint (as vLLM reads it).
  std::vector<std::string> modules_to_not_convert;
  // GPTQ quantization_config.lm_head (GPTQModel): the output head is quantized too.
  bool lm_head = false;
};

// The nibble order of AutoAWQ's packing: nibble i of a word holds output 8j + kAwqOrder[i].
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// One quantized layer unpacked into output-major arrays (PackedWeight::IntPart's form).
struct UnpackedIntWeight {
  int64_t n = 0, k = 0, group = 0;  // group: columns per group (k for -1)
  std::vector<uint8_t> q;           // [n, k]
  int64_t ngroups = 0;              // k / group
  std::vector<uint16_t> zeros;      // [n, ngroups] zero points (GPTQ v1 offset applied)
  std::vector<uint16_t> scales;     // [n, ngroups] f16 bits
  // compressed-tensors scales that f16 cannot hold exactly: [n, ngroups] in f32 (then `scales`
  // is empty and the layer cannot use the integer kernels).
  std::vector<float> scales_f32;
  std::vector<int32_t> g_idx;  // [k] group of each column; empty when contiguous (c / group)
  // The exact value of element (r, c).
  float value(int64_t r, int64_t c) const;
};

// Reads and unpacks `<base>.qweight/.qzeros/.scales(/.g_idx)` of a [n, k] layer
// (compressed-tensors: `<base>.weight_packed/.weight_scale(/.weight_zero_point/.weight_g_idx)`).
Result<UnpackedIntWeight> read_int_weight(WeightSource& src, const std::string& base, int64_t n,
                                          int64_t k, const IntQuantization& quant);

// Whether read_int_weight() of this layer would find contiguous groups (no g_idx other than
// c / group) and scales f16 holds exactly, i.e. whether the layer can use the integer layout;
// reads only its g_idx and (compressed-tensors) scale tensors. For memory estimates.
Result<bool> int_weight_has_plain_groups(WeightSource& src, const std::string& base, int64_t n,
                                         int64_t k, const IntQuantization& quant);

// Whether an AWQ or GPTQ checkpoint of a config quantizes the linear layer `base` ("...q_proj",
// no ".weight"), as AutoAWQ / AutoGPTQ write them and vLLM reads them: every linear layer of the
// decoder layers (attention, MLA, dense MLP, expert and shared-expert projections) except the
// MoE routers (`gate`, `shared_expert_gate`), norms and the MTP layer's own embedding, input
// projection and head; the output head only with GPTQ's lm_head: true; never a layer in
// modules_to_not_convert. What dummy weights of such a config quantize (weight_source.h
// make_int_quant_dummy_source), so a plan from its config alone is the checkpoint's.
bool int_quantizes_layer(const IntQuantization& quant, const std::string& base);

// Whether `name` ("...weight") is stored quantized in `src` (`<base>.qweight`, or
// `<base>.weight_packed` for compressed-tensors): the base name, else empty.
std::string int_quantized_base(const WeightSource& src, const std::string& name);

}  // namespace strata
