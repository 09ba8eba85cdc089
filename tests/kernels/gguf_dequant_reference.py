#!/usr/bin/env python3
"""Random GGUF quantized blocks and their dequantization by llama.cpp's gguf-py (numpy).

Usage: gguf_dequant_reference.py QTYPE N_BLOCKS SEED BYTES_OUT FLOATS_OUT

QTYPE is a ggml type name (Q4_0, Q4_K, IQ4_XS, ...). Writes N_BLOCKS random blocks of that type
(raw bytes) to BYTES_OUT and gguf-py's dequantization of them (little-endian float32, block after
block) to FLOATS_OUT. gguf_dequant_llama_cpp_test.cpp compares the latter with Strata's
dequantize_row. Run with PYTHONPATH set to a llama.cpp checkout's gguf-py directory.

Every byte is random except the f16 scale fields ("d", "dmin", "m"), which are random finite
halves of magnitude below 2 (any sign, exponent field 0..15, any mantissa: zeros and subnormals
included), so that no block decodes to inf or NaN.

Exit status: 0 done; 2 bad arguments; 3 this gguf-py has no such type or cannot dequantize it
(the test skips, printing the message); anything else is a failure.
"""
import sys

# Byte offsets of the f16 fields inside one block of each type, from ggml's block layouts.
F16_FIELDS = {
    "Q4_0": (0,),
    "Q4_1": (0, 2),
    "Q5_0": (0,),
    "Q5_1": (0, 2),
    "Q8_0": (0,),
    "IQ4_NL": (0,),
    "Q2_K": (80, 82),  # scales[16], qs[64], d, dmin
    "Q3_K": (108,),  # hmask[32], qs[64], scales[12], d
    "Q4_K": (0, 2),  # d, dmin, scales[12], qs[128]
    "Q5_K": (0, 2),  # d, dmin, scales[12], qh[32], qs[128]
    "Q6_K": (208,),  # ql[128], qh[64], scales[16], d
    "IQ4_XS": (0,),  # d, scales_h, scales_l[4], qs[128]
}


def random_halves(rng, n):
    """n random f16 bit patterns with exponent field 0..15 (|x| < 2), as uint16."""
    import numpy as np

    sign = rng.integers(0, 2, n, dtype=np.uint16) << np.uint16(15)
    exponent = rng.integers(0, 16, n, dtype=np.uint16) << np.uint16(10)
    mantissa = rng.integers(0, 1 << 10, n, dtype=np.uint16)
    return (sign | exponent | mantissa).astype("<u2")


def main(argv):
    if len(argv) != 6 or argv[1] not in F16_FIELDS:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        print("QTYPE is one of: " + " ".join(sorted(F16_FIELDS)), file=sys.stderr)
        return 2
    qtype_name, n_blocks, seed, bytes_out, floats_out = argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5]

    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf import quants

    qtype = getattr(GGMLQuantizationType, qtype_name, None)
    if qtype is None or qtype not in GGML_QUANT_SIZES:
        print(f"this gguf-py has no quantization type {qtype_name}", file=sys.stderr)
        return 3
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]

    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for offset in F16_FIELDS[qtype_name]:
        blocks[:, offset:offset + 2] = random_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)

    try:
        values = quants.dequantize(blocks.reshape(-1), qtype)
    except NotImplementedError as e:
        print(f"this gguf-py cannot dequantize {qtype_name}: {e}", file=sys.stderr)
        return 3
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    if values.size != n_blocks * block_elems:
        print(f"gguf-py gave {values.size} values for {n_blocks} blocks of {block_elems}", file=sys.stderr)
        return 1
    if not np.all(np.isfinite(values)):
        print("gguf-py gave non-finite values: the scale fields are not where this script puts them",
              file=sys.stderr)
        return 1

    with open(bytes_out, "wb") as f:
        f.write(blocks.tobytes())
    with open(floats_out, "wb") as f:
        f.write(values.astype("<f4").tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
