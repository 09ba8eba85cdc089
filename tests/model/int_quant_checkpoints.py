#!/usr/bin/env python3
"""Writes small Llama checkpoints quantized the AWQ, GPTQ and compressed-tensors ways, for
int_quant_test.cpp.

An independent quantizer (numpy only, written for Strata's tests): random float weights for a
tiny Llama are quantized per output row and group of input columns to codes q, f16 scales s and
integer zero points z (value = s * (q - z)), then packed as the published formats lay them out:

  AWQ (AutoAWQ GEMM): qweight int32 [in, out/8]: word j of input row c holds outputs
      8j..8j+7, output 8j + ORDER[i] in bits 4i..4i+3 with ORDER = [0, 2, 4, 6, 1, 3, 5, 7];
      qzeros int32 [in/G, out/8] packed the same way; scales f16 [in/G, out].
  GPTQ (AutoGPTQ): qweight int32 [in*bits/32, out]: word r of output o holds inputs
      r*(32/bits) + i in bits bits*i..; qzeros int32 [in/G, out*bits/32] packed the same way
      along outputs, holding z - 1 in the default "gptq" (v1) format and z in "gptq_v2"; scales
      f16 [in/G, out]; g_idx int32 [in] the group of each input (a permutation's groups with
      desc_act).
  compressed-tensors "pack-quantized": codes and zero points are signed (q in [-2^(bits-1),
      2^(bits-1))), stored with 2^(bits-1) added; weight_packed int32 [out, in*bits/32]: word j
      of output o holds inputs j*(32/bits) + i in bits bits*i..; weight_zero_point (asymmetric
      only) int32 [out*bits/32, in/G] packed the same way along outputs; weight_scale [out, in/G]
      in bf16, f16 or f32; weight_shape int64 [2]; weight_g_idx int32 [in] with actorder "group".
      lm_head is in `ignore` (stays a plain tensor).

Embeddings, norms and lm_head stay f16. For each case it writes <out>/<case>/ (config.json with
quantization_config, model.safetensors) and <out>/<case>.dequant/ (the same model unquantized:
float32 tensors holding exactly s * (q - z) computed here, plus the f16 tensors as float32).

Usage: int_quant_checkpoints.py OUT_DIR
"""
import json
import os
import sys

import numpy as np

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 128, 256, 2, 4, 2, 160
HEAD_DIM = HIDDEN // HEADS
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]

# name, method, bits, group (-1: whole row), sym, desc_act, checkpoint_format (compressed-tensors:
# the scales' dtype, "+a8" when the scheme also quantizes input activations)
CASES = [
    ("awq_g32", "awq", 4, 32, False, False, None),
    ("awq_g64", "awq", 4, 64, False, False, None),
    ("gptq_4bit_asym_g32", "gptq", 4, 32, False, False, "gptq"),
    ("gptq_4bit_sym_g128", "gptq", 4, 128, True, False, "gptq"),
    ("gptq_4bit_sym_rowwise", "gptq", 4, -1, True, False, "gptq"),
    ("gptq_8bit_sym_g64", "gptq", 8, 64, True, False, "gptq"),
    ("gptq_8bit_asym_g32_v2", "gptq", 8, 32, False, False, "gptq_v2"),
    ("gptq_4bit_desc_act_g32", "gptq", 4, 32, False, True, "gptq"),
    ("ct_w4_sym_g32", "compressed-tensors", 4, 32, True, False, "bf16"),
    ("ct_w4_asym_g64", "compressed-tensors", 4, 64, False, False, "bf16"),
    ("ct_w8_sym_channel", "compressed-tensors", 8, -1, True, False, "bf16"),
    ("ct_w8_asym_g64", "compressed-tensors", 8, 64, False, False, "f16"),
    ("ct_w4_sym_g128_a8", "compressed-tensors", 4, 128, True, False, "bf16+a8"),
    ("ct_w4_sym_g32_f32_scales", "compressed-tensors", 4, 32, True, False, "f32"),
    ("ct_w4_asym_actorder_g32", "compressed-tensors", 4, 32, False, True, "bf16"),
]


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        if isinstance(arr, tuple):  # ("BF16", uint16 bits)
            dt, arr = arr
            arr = np.ascontiguousarray(arr)
        else:
            arr = np.ascontiguousarray(arr)
            dt = {np.dtype("float32"): "F32", np.dtype("float16"): "F16",
                  np.dtype("int32"): "I32", np.dtype("int64"): "I64"}[arr.dtype]
        raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def quantize(w, bits, group, sym, groups_of_col, v1):
    """w [out, in] float32 -> q [out, in] uint, scales f16 [ngroups, out], zeros [ngroups, out]."""
    out_f, in_f = w.shape
    maxq = (1 << bits) - 1
    ngroups = groups_of_col.max() + 1
    scales = np.zeros((ngroups, out_f), np.float16)
    zeros = np.zeros((ngroups, out_f), np.int64)
    q = np.zeros((out_f, in_f), np.int64)
    for g in range(ngroups):
        cols = np.nonzero(groups_of_col == g)[0]
        wg = w[:, cols].astype(np.float64)
        if sym:
            amax = np.maximum(np.abs(wg).max(axis=1), 1e-8)
            s = (2 * amax / maxq).astype(np.float16)
            z = np.full(out_f, (maxq + 1) // 2)
        else:
            lo = np.minimum(wg.min(axis=1), 0)
            hi = np.maximum(wg.max(axis=1), 0)
            s = np.maximum((hi - lo) / maxq, 1e-8).astype(np.float16)
            z = np.clip(np.round(-lo / s.astype(np.float64)), 0, maxq).astype(np.int64)
            if v1:  # the v1 format cannot say zero 0 (it stores z - 1)
                z = np.maximum(z, 1)
        scales[g] = s
        zeros[g] = z
        qg = np.round(wg / s.astype(np.float64)[:, None]) + z[:, None]
        q[:, cols] = np.clip(qg, 0, maxq).astype(np.int64)
    return q, scales, zeros


def dequantize(q, scales, zeros, groups_of_col):
    s = scales[groups_of_col, :].T.astype(np.float32)  # [out, in]
    z = zeros[groups_of_col, :].T
    return s * (q - z).astype(np.float32)


def pack_awq(q, scales, zeros):
    out_f, in_f = q.shape
    qt = q.T.astype(np.uint32)  # [in, out]
    qweight = np.zeros((in_f, out_f // 8), np.uint32)
    qzeros = np.zeros((zeros.shape[0], out_f // 8), np.uint32)
    for i, col in enumerate(AWQ_ORDER):
        qweight |= qt[:, col::8] << np.uint32(4 * i)
        qzeros |= zeros[:, col::8].astype(np.uint32) << np.uint32(4 * i)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32), "scales": scales}


def pack_gptq(q, scales, zeros, bits, g_idx, v1):
    out_f, in_f = q.shape
    per = 32 // bits
    mask = np.uint32((1 << bits) - 1)
    qt = q.T.astype(np.uint32)  # [in, out]
    qweight = np.zeros((in_f // per, out_f), np.uint32)
    for i in range(per):
        qweight |= qt[i::per, :] << np.uint32(bits * i)
    stored = ((zeros - 1) if v1 else zeros).astype(np.int64) & int(mask)
    stored = stored.astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], out_f // per), np.uint32)
    for i in range(per):
        qzeros |= stored[:, i::per] << np.uint32(bits * i)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32), "scales": scales,
            "g_idx": g_idx.astype(np.int32)}


def to_bf16_bits(x):
    """float32 -> bf16 bits (round to nearest even)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def quantize_ct(w, bits, sym, groups_of_col, scale_dtype):
    """compressed-tensors: w [out, in] -> stored codes [out, in], stored zeros [out, ngroups],
    the scales as written (dtype tag, array [out, ngroups]) and as float32."""
    out_f, in_f = w.shape
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    ngroups = groups_of_col.max() + 1
    s32 = np.zeros((out_f, ngroups), np.float32)
    zp = np.zeros((out_f, ngroups), np.int64)
    q = np.zeros((out_f, in_f), np.int64)
    for g in range(ngroups):
        cols = np.nonzero(groups_of_col == g)[0]
        wg = w[:, cols].astype(np.float64)
        if sym:
            s = np.maximum(np.abs(wg).max(axis=1), 1e-8) / ((qmax - qmin) / 2)
        else:
            lo, hi = np.minimum(wg.min(axis=1), 0), np.maximum(wg.max(axis=1), 0)
            s = np.maximum((hi - lo) / (qmax - qmin), 1e-8)
        s = s.astype(np.float32)
        if scale_dtype == "bf16":
            s = bf16_bits_to_f32(to_bf16_bits(s))
        elif scale_dtype == "f16":
            s = s.astype(np.float16).astype(np.float32)
        else:  # f32: full mantissas, which f16 cannot hold
            s = s * np.float32(1.0 + 2.0 ** -20)
        z = np.zeros(out_f, np.int64) if sym else np.clip(
            np.round(qmin - lo / s.astype(np.float64)), qmin, qmax).astype(np.int64)
        s32[:, g] = s
        zp[:, g] = z
        qg = np.round(wg / s.astype(np.float64)[:, None]) + z[:, None]
        q[:, cols] = np.clip(qg, qmin, qmax).astype(np.int64)
    off = 1 << (bits - 1)
    if scale_dtype == "bf16":
        written = ("BF16", to_bf16_bits(s32))
    elif scale_dtype == "f16":
        written = s32.astype(np.float16)
    else:
        written = s32
    return q + off, zp + off, written, s32


def pack_ct(q_stored, zp_stored, scales, bits, sym, g_idx, actorder):
    out_f, in_f = q_stored.shape
    per = 32 // bits
    qp = np.zeros((out_f, -(-in_f // per)), np.uint32)
    for i in range(per):
        part = q_stored[:, i::per].astype(np.uint32)
        qp[:, :part.shape[1]] |= part << np.uint32(bits * i)
    t = {"weight_packed": qp.view(np.int32), "weight_scale": scales,
         "weight_shape": np.array([out_f, in_f], np.int64)}
    if not sym:
        zp = np.zeros((-(-out_f // per), zp_stored.shape[1]), np.uint32)
        for i in range(per):
            part = zp_stored[i::per, :].astype(np.uint32)
            zp[:part.shape[0], :] |= part << np.uint32(bits * i)
        t["weight_zero_point"] = zp.view(np.int32)
    if actorder:
        t["weight_g_idx"] = g_idx.astype(np.int32)
    return t


def base_config():
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB,
            "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}


def write_case(out, case, rng):
    name, method, bits, group, sym, desc_act, fmt = case
    v1 = fmt == "gptq"
    floats, dense, quant = {}, {}, {}
    floats["model.embed_tokens.weight"] = (rng.standard_normal((VOCAB, HIDDEN)) * 0.5)
    floats["lm_head.weight"] = rng.standard_normal((VOCAB, HIDDEN)) * 0.08
    floats["model.norm.weight"] = 1 + 0.1 * rng.standard_normal(HIDDEN)
    linears = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
               "self_attn.v_proj": (KV_HEADS * HEAD_DIM, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
               "mlp.gate_proj": (FFN, HIDDEN), "mlp.up_proj": (FFN, HIDDEN),
               "mlp.down_proj": (HIDDEN, FFN)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        floats[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(HIDDEN)
        floats[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(HIDDEN)
        for lin, (out_f, in_f) in linears.items():
            w = (rng.standard_normal((out_f, in_f)) * (1.5 / np.sqrt(in_f))).astype(np.float32)
            g = in_f if group == -1 else group
            if desc_act:
                perm = rng.permutation(in_f)
                g_idx = np.zeros(in_f, np.int64)
                g_idx[perm] = np.arange(in_f) // g
            else:
                g_idx = np.arange(in_f) // g
            if method == "compressed-tensors":
                q, z, written, s32 = quantize_ct(w, bits, sym, g_idx, fmt.split("+")[0])
                packed = pack_ct(q, z, written, bits, sym, g_idx, desc_act)
                # The dequantized value scale * (q - zp), in float32 as the loader computes it.
                dense[p + lin + ".weight"] = (s32[:, g_idx] *
                                              (q - z[:, g_idx]).astype(np.float32))
                for k, v in packed.items():
                    quant[p + lin + "." + k] = v
                continue
            q, s, z = quantize(w, bits, g, sym, g_idx, v1)
            packed = pack_awq(q, s, z) if method == "awq" else pack_gptq(q, s, z, bits, g_idx, v1)
            for k, v in packed.items():
                quant[p + lin + "." + k] = v
            dense[p + lin + ".weight"] = dequantize(q, s, z, g_idx)
    floats = {k: v.astype(np.float16) for k, v in floats.items()}

    qc = {"quant_method": method, "bits": bits, "group_size": group}
    if method == "awq":
        qc.update({"zero_point": True, "version": "gemm"})
    elif method == "compressed-tensors":
        weights = {"num_bits": bits, "type": "int", "symmetric": sym,
                   "strategy": "channel" if group == -1 else "group",
                   "group_size": None if group == -1 else group,
                   "actorder": "group" if desc_act else None, "dynamic": False,
                   "observer": "minmax"}
        acts = ({"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                 "dynamic": True} if fmt.endswith("+a8") else None)
        qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
              "quantization_status": "compressed", "ignore": ["lm_head"],
              "kv_cache_scheme": None, "sparsity_config": {},
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                            "input_activations": acts,
                                            "output_activations": None}}}
    else:
        qc.update({"sym": sym, "desc_act": desc_act, "checkpoint_format": fmt})
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    cfg = dict(base_config(), torch_dtype="float16", quantization_config=qc)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), {**floats, **quant})

    dd = os.path.join(out, name + ".dequant")
    os.makedirs(dd, exist_ok=True)
    with open(os.path.join(dd, "config.json"), "w") as f:
        json.dump(dict(base_config(), torch_dtype="float32"), f, indent=1)
    write_safetensors(os.path.join(dd, "model.safetensors"),
                      {**{k: v.astype(np.float32) for k, v in floats.items()}, **dense})


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(20261204)
    for case in CASES:
        write_case(out, case, rng)
        print(case[0])


if __name__ == "__main__":
    main()
