#!/usr/bin/env python3
"""Writes the hand-written seed corpus of every fuzz target into tests/fuzz/<target>/seed-*.

The seeds are small valid (and a few nearly valid) inputs, so that the fuzzers start from the
shapes real traffic and real files have. Re-running rewrites the same files. Inputs of crashes the
fuzzers found are kept beside them as regress-* files (see README.md) and are not touched here.
"""
import base64
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- http_request: first byte = how the fuzz target splits the rest into pieces -----------------
def http_seeds():
    put("http_request", "get", b"\x05GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    body = b'{"prompt": "hi", "max_tokens": 4}'
    put("http_request", "post-length",
        b"\x11POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    put("http_request", "post-chunked",
        b"\x03POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
        b"Expect: 100-continue\r\n\r\n5;name=v\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
        b"0\r\nX-Trailer: done\r\n\r\n")
    put("http_request", "pipelined-lf",
        b"\x02\r\nGET /v1/models?x=1&y HTTP/1.0\nConnection: keep-alive\n\n"
        b"GET http://example.com/metrics HTTP/1.1\nContent-Length: 0, 0\n\n"
        b"DELETE * HTTP/1.1\r\nConnection: close\r\n\r\n")
    put("http_request", "malformed",
        b"\x09POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
        b" folded: no\r\n\r\nabc")
    put("http_request", "responses",
        b"\x07HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        b"HTTP/1.1 204 No Content\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        b"HTTP/1.0 503 Busy\r\nRetry-After: 1\r\n\r\nuntil the end")
    put("http_request", "version", b"\x01GET / HTTP/2.0\r\n\r\nGET / HTTP/1.9\r\n\r\n")


# ---- openai_request: a request body, parsed as every endpoint would -----------------------------
def openai_seeds():
    seeds = {
        "completion": {"model": "m", "prompt": "Once upon a time", "max_tokens": 8},
        "completion-batch-ids": {"prompt": [[256, 72, 105], [104, 105]], "n": 2, "echo": True,
                                 "logprobs": 2, "add_special_tokens": False},
        "completion-sampling": {
            "prompt": ["a", "b"], "temperature": 0.5, "top_p": 0.9, "top_k": 20, "min_p": 0.1,
            "seed": -7, "stop": ["\n", "END"], "stop_token_ids": [3], "logit_bias": {"105": 2.5},
            "presence_penalty": 0.1, "frequency_penalty": -0.2, "repetition_penalty": 1.05,
            "min_tokens": 1, "ignore_eos": True, "skip_special_tokens": False,
            "include_stop_str_in_output": True, "prompt_logprobs": 1, "priority": -1,
            "user": "u", "cache_salt": "salt", "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "response_format": {"type": "text"}, "best_of": 1},
        "chat-tools": {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
            "tools": [{"type": "function", "function": {
                "name": "weather", "parameters": {"type": "object",
                                                  "properties": {"city": {"type": "string"}}}}}],
            "tool_choice": "auto", "max_completion_tokens": 5},
        "chat-parts": {
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "look"}, {"type": "text", "text": " here"}]},
                {"role": "assistant", "content": "I see"}],
            "continue_final_message": True, "add_generation_prompt": False, "echo": True,
            "chat_template_kwargs": {"enable_thinking": False},
            "documents": [{"title": "t", "text": "d"}], "logprobs": True, "top_logprobs": 3},
        "tokenize": {"prompt": "hello <|eos|> there", "add_special_tokens": True,
                     "return_token_strs": True},
        "tokenize-chat": {"messages": [{"role": "user", "content": "hi"}],
                          "add_generation_prompt": True},
        "detokenize": {"model": "m", "tokens": [256, 104, 105, 257, 9999]},
    }
    for name, body in seeds.items():
        put("openai_request", name, json.dumps(body, indent=1))
    put("openai_request", "bad-json", '{"prompt": "unterminated')
    put("openai_request", "wrong-types", '{"prompt": 1.5, "n": "2", "stop": [1], "seed": 1e300,'
        ' "messages": {"role": "user"}, "tokens": [-1]}')


# ---- GGUF -----------------------------------------------------------------------------------------
GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, \
    GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64 = range(13)
SCALAR_FMT = {GGUF_U8: "<B", GGUF_I8: "<b", GGUF_U16: "<H", GGUF_I16: "<h", GGUF_U32: "<I",
              GGUF_I32: "<i", GGUF_F32: "<f", GGUF_BOOL: "<?", GGUF_U64: "<Q", GGUF_I64: "<q",
              GGUF_F64: "<d"}


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == GGUF_STRING:
        return gguf_str(v)
    if t == GGUF_ARRAY:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for item in items:
            out += gguf_value(et, item)
        return out
    return struct.pack(SCALAR_FMT[t], v)


def gguf_file(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, ne list, data bytes)]."""
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gguf_str(key) + struct.pack("<I", t) + gguf_value(t, v)
    offset = 0
    blobs = []
    for name, gt, ne, data in tensors:
        out += gguf_str(name) + struct.pack("<I", len(ne))
        for n in ne:
            out += struct.pack("<Q", n)
        out += struct.pack("<IQ", gt, offset)
        blobs.append((offset, data))
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * ((-len(out)) % alignment)
    start = len(out)
    for off, data in blobs:
        out += b"\0" * (start + off - len(out)) + data
    return out


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def gguf_seeds():
    q8_block = struct.pack("<e", 0.5) + bytes(range(32))
    kvs = [("general.architecture", GGUF_STRING, "llama"),
           ("general.alignment", GGUF_U32, 32),
           ("general.name", GGUF_STRING, "seed"),
           ("llama.context_length", GGUF_U64, 2048),
           ("llama.embedding_length", GGUF_U32, 4),
           ("llama.rope.freq_base", GGUF_F32, 10000.0),
           ("llama.attention.layer_norm_rms_epsilon", GGUF_F64, 1e-5),
           ("llama.use_parallel_residual", GGUF_BOOL, True),
           ("general.file_type", GGUF_I32, 1),
           ("some.i8", GGUF_I8, -3), ("some.u16", GGUF_U16, 65535), ("some.i16", GGUF_I16, -2),
           ("some.i64", GGUF_I64, -(1 << 40)), ("some.u8", GGUF_U8, 7),
           ("some.floats", GGUF_ARRAY, (GGUF_F32, [0.5, -1.0, 3.25])),
           ("some.ints", GGUF_ARRAY, (GGUF_I32, [1, -2, 3])),
           ("some.strings", GGUF_ARRAY, (GGUF_STRING, ["a", "", "\u00e9"]))]
    tensors = [("token_embd.weight", 0, [4, 2], f32(*range(8))),
               ("blk.0.attn_q.weight", 8, [32, 1], q8_block),
               ("output_norm.weight", 1, [3], struct.pack("<3e", 1.0, 2.0, 3.0)),
               ("bf16.weight", 30, [2], b"\x80\x3f\x00\x40"),
               ("q4k.weight", 12, [256], bytes(144))]
    put("gguf", "model-v3", gguf_file(kvs, tensors))
    put("gguf", "metadata-only-v2", gguf_file(kvs[:6], [], version=2))
    put("gguf", "alignment-64", gguf_file([("general.alignment", GGUF_U32, 64)],
                                          [("t", 0, [2, 2], f32(1, 2, 3, 4))], alignment=64))
    put("gguf", "empty", gguf_file([], []))


# ---- safetensors ------------------------------------------------------------------------------------
def safetensors_file(tensors, metadata=None, pad_header_to=8):
    """tensors: [(name, dtype, shape, data bytes)]."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % pad_header_to)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    put("safetensors", "one-f32", safetensors_file([("w", "F32", [2, 2], f32(1, 2, 3, 4))]))
    put("safetensors", "dtypes", safetensors_file(
        [("a", "F16", [3], struct.pack("<3e", 1, 2, 3)), ("b", "BF16", [1, 2], b"\x80\x3f\0\x40"),
         ("c", "F8_E4M3", [4], b"\x38\x40\x48\x50"), ("d", "I64", [1], struct.pack("<q", -5)),
         ("e", "BOOL", [2], b"\x01\x00"), ("f", "U8", [0, 4], b""), ("g", "I32", [], b"\1\0\0\0"),
         ("h", "F64", [1], struct.pack("<d", 0.25)), ("i", "I8", [2], b"\xff\x01"),
         ("j", "I16", [1], b"\x02\x00")],
        metadata={"format": "pt", "note": "seed"}))
    put("safetensors", "empty-header", safetensors_file([]))
    put("safetensors", "bad-offsets", struct.pack("<Q", 60) +
        b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}}    ' + b"\0" * 8)


# ---- tokenizer.json ---------------------------------------------------------------------------------
def byte_level_alphabet():
    """GPT-2's byte -> printable character table (bytes_to_unicode), written out here."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tokenizer_json_seeds():
    alphabet = byte_level_alphabet()
    vocab = {alphabet[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("e", "ll"), ("h", "ell"),
              ("hell", "o")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    byte_level = {
        "version": "1.0",
        "added_tokens": [
            {"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True},
            {"id": len(vocab) + 1, "content": "<|im_start|>", "single_word": False,
             "lstrip": True, "rstrip": False, "normalized": False, "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": True}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [],
                           "special_tokens": {"<|endoftext|>": {
                               "id": "<|endoftext|>", "ids": [len(vocab)],
                               "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]}}
    put("tokenizer_json", "byte-level-bpe", json.dumps(byte_level, ensure_ascii=False, indent=1))

    sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        sp_vocab["<0x%02X>" % b] = len(sp_vocab)
    for piece in ["▁", "a", "b", "c", "▁a", "ab", "▁ab", "▁abc", "bc"]:
        sp_vocab[piece] = len(sp_vocab)
    sp_bpe = {
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                         {"id": 1, "content": "<s>", "special": True},
                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                  "vocab": sp_vocab,
                  "merges": [["▁", "a"], ["a", "b"], ["▁a", "b"], ["▁ab", "c"], ["b", "c"]]}}
    put("tokenizer_json", "sentencepiece-bpe", json.dumps(sp_bpe, ensure_ascii=False, indent=1))

    unigram = {
        "added_tokens": [{"id": 0, "content": "<pad>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "StripAccents"},
            {"type": "Strip", "left": True, "right": True}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True},
            {"type": "Punctuation", "behavior": "Isolated"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
             "split": True}]},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
        "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": False,
                  "vocab": [["<pad>", 0.0], ["<unk>", 0.0], ["▁", -2.0], ["▁the", -3.0],
                            ["t", -4.0], ["h", -4.0], ["e", -4.0], ["1", -5.0], [".", -5.0],
                            ["▁a", -3.5], ["a", -4.5]]}}
    put("tokenizer_json", "unigram", json.dumps(unigram, ensure_ascii=False, indent=1))
    put("tokenizer_json", "bert-like", json.dumps({
        "normalizer": {"type": "NFD"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
        "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4,
                                           "ab": 5}, "merges": ["a b"], "unk_token": "[UNK]"}},
        indent=1))


# ---- vocab: 'm' tokenizer.model, 'b' vocab.json NUL merges.txt, 'g' GGUF vocabulary ----------------
def varint(n):
    if n < 0:
        n += 1 << 64
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_field(field, wire, payload):
    key = varint((field << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    if wire == 5:
        return key + payload
    raise ValueError(wire)


def sp_model(pieces, model_type, byte_fallback=False, normalizer=None):
    out = b""
    for piece, score, ptype in pieces:
        p = pb_field(1, 2, piece.encode()) + pb_field(2, 5, struct.pack("<f", score))
        if ptype != 1:
            p += pb_field(3, 0, ptype)
        out += pb_field(1, 2, p)
    trainer = pb_field(3, 0, model_type) + pb_field(4, 0, len(pieces))
    if byte_fallback:
        trainer += pb_field(35, 0, 1)
    trainer += pb_field(40, 0, 0) + pb_field(41, 0, 1) + pb_field(42, 0, 2) + pb_field(43, 0, -1)
    out += pb_field(2, 2, trainer)
    norm = normalizer if normalizer is not None else (
        pb_field(1, 2, b"identity") + pb_field(3, 0, 1) + pb_field(4, 0, 1) + pb_field(5, 0, 1))
    out += pb_field(3, 2, norm)
    return out


def vocab_seeds():
    specials = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    bpe_pieces = specials + [("<0x%02X>" % b, 0.0, 6) for b in range(256)] + [
        ("▁", -1.0, 1), ("a", -2.0, 1), ("b", -2.0, 1), ("▁a", -3.0, 1), ("ab", -3.5, 1),
        ("▁ab", -4.0, 1), ("<tool>", 0.0, 4)]
    put("vocab", "sentencepiece-bpe", b"m" + sp_model(bpe_pieces, 2, byte_fallback=True))
    uni_pieces = specials + [("▁", -1.0, 1), ("▁the", -2.0, 1), ("t", -3.0, 1), ("h", -3.0, 1),
                             ("e", -3.0, 1), ("unused", 0.0, 5)]
    put("vocab", "sentencepiece-unigram", b"m" + sp_model(uni_pieces, 1))
    tiktoken = "".join("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b) for b in range(256))
    tiktoken += "%s 256\n%s 257\n" % (base64.b64encode(b"he").decode(),
                                     base64.b64encode(b"hello").decode())
    put("vocab", "tiktoken", b"m" + tiktoken.encode())

    alphabet = byte_level_alphabet()
    vocab = {alphabet[b]: b for b in range(256)}
    merges = ["Ġ t", "h e", "Ġt he", "l l", "e ll"]
    for m in merges:
        vocab[m.replace(" ", "")] = len(vocab)
    put("vocab", "vocab-merges", b"b" + json.dumps(vocab, ensure_ascii=False).encode() + b"\0" +
        ("#version: 0.2\n" + "\n".join(merges) + "\n").encode())
    config = {"tokenizer_class": "Qwen2Tokenizer", "add_prefix_space": False,
              "bos_token": None, "eos_token": {"content": "<|endoftext|>", "special": True},
              "pad_token": "<|endoftext|>", "add_bos_token": False,
              "clean_up_tokenization_spaces": False, "model_max_length": 32768,
              "added_tokens_decoder": {str(len(vocab)): {
                  "content": "<|endoftext|>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False, "special": True}},
              "chat_template": [{"name": "default", "template": "{{ messages[0].content }}"},
                                {"name": "tool_use", "template": "{{ tools | tojson }}"}]}
    put("vocab", "vocab-merges-config", b"b" + json.dumps(vocab, ensure_ascii=False).encode() +
        b"\0" + ("\n".join(merges) + "\n").encode() + b"\0" + json.dumps(config).encode())
    sp_json = {"model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "<unk>": 2, "\u2581": 3,
                                                  "a": 4, "\u2581a": 5},
                         "merges": ["\u2581 a"], "unk_token": "<unk>", "byte_fallback": False},
               "normalizer": {"type": "Sequence", "normalizers": [
                   {"type": "Prepend", "prepend": "\u2581"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
               "decoder": {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}}
    llama_config = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
                    "add_eos_token": True, "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "legacy": False,
                    "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"}
    put("vocab", "tokenizer-json-config", b"j" + json.dumps(sp_json).encode() + b"\0" +
        json.dumps(llama_config).encode())

    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "<0x0A>"]
    llama_kvs = [("general.architecture", GGUF_STRING, "llama"),
                 ("tokenizer.ggml.model", GGUF_STRING, "llama"),
                 ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
                 ("tokenizer.ggml.scores", GGUF_ARRAY,
                  (GGUF_F32, [0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -3.0, -3.0, 0.0])),
                 ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [2, 3, 3, 1, 1, 1, 1, 1, 6])),
                 ("tokenizer.ggml.bos_token_id", GGUF_U32, 1),
                 ("tokenizer.ggml.eos_token_id", GGUF_U32, 2),
                 ("tokenizer.ggml.unknown_token_id", GGUF_U32, 0),
                 ("tokenizer.ggml.add_bos_token", GGUF_BOOL, True),
                 ("tokenizer.chat_template", GGUF_STRING,
                  "{% for m in messages %}{{ m.content }}{% endfor %}")]
    put("vocab", "gguf-llama", b"g" + gguf_file(llama_kvs, []))
    g_tokens = [alphabet[b] for b in range(256)] + ["Ġt", "he", "Ġthe", "<|endoftext|>"]
    gpt2_kvs = [("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
                ("tokenizer.ggml.pre", GGUF_STRING, "qwen2"),
                ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, g_tokens)),
                ("tokenizer.ggml.token_type", GGUF_ARRAY,
                 (GGUF_I32, [1] * 259 + [3])),
                ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, ["Ġ t", "h e", "Ġt he"])),
                ("tokenizer.ggml.eos_token_id", GGUF_U32, 259),
                ("tokenizer.ggml.add_eos_token", GGUF_BOOL, False)]
    put("vocab", "gguf-gpt2", b"g" + gguf_file(gpt2_kvs, []))


# ---- jinja: template sources --------------------------------------------------------------------
def jinja_seeds():
    put("jinja", "chatml", """{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You are helpful.' }}
# Tools
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}<|im_end|>
{% endif %}
{%- for message in messages %}
    {%- if message.role == 'tool' %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
    {%- elif message.tool_calls %}<|im_start|>assistant
{%- for call in message.tool_calls %}
<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>
{%- endfor %}<|im_end|>
    {%- else %}<|im_start|>{{ message.role }}
{{ message.content if message.content is string else message.content | map(attribute='text') | select('defined') | join('') }}<|im_end|>
    {%- endif %}
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}""")
    put("jinja", "llama-style", """{{- bos_token }}
{%- set ns = namespace(system='', count=0) %}
{%- for m in messages %}{% if m.role == 'system' %}{% set ns.system = m.content %}{% endif %}{% endfor %}
{%- macro header(role) -%}<|start_header_id|>{{ role }}<|end_header_id|>\n\n{%- endmacro %}
{{- header('system') }}Cutting Knowledge Date: {{ strftime_now('%d %b %Y') }}
{{ ns.system | trim }}<|eot_id|>
{%- for m in messages if m.role != 'system' %}
{%- set ns.count = ns.count + 1 %}
{{- header(m.role) }}{% if m.content is none %}{{ m.tool_calls | map(attribute='function') | map(attribute='name') | list | tojson }}{% else %}{{ m.content | string | trim }}{% endif %}<|eot_id|>
{%- endfor %}
{%- if add_generation_prompt %}{{ header('assistant') }}{% endif %}
{#- {{ ns.count }} messages #}""")
    put("jinja", "expressions", """{% set xs = [3, 1, 2] + numbers %}{{ xs | sort | reverse | join(',') }}
{{ xs | length }} {{ xs | sum }} {{ xs | min }} {{ xs | max }} {{ (xs | first) // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ -3 | abs }}
{{ "%s-%05.2f|%x" % ("a", 3.14159, 255) }} {{ "{}:{}".format(1, "b") }} {{ 'Hello'[1:4] }} {{ 'a,b,,c'.split(',') }}
{{ nested.a.b.c[1][1] }} {{ nested | tojson(indent=2) }} {{ {'k': [1, none, true]} | items | list }}
{% for k, v in nested.a | dictsort %}{{ loop.index }}/{{ loop.length }} {{ k }}={{ v }}{% if not loop.last %}; {% endif %}{% endfor %}
{% for i in range(10) %}{% if i is even %}{% continue %}{% elif i > 7 %}{% break %}{% endif %}{{ i }}{{ loop.cycle('a', 'b') }}{% endfor %}
{{ 'abc' | upper | replace('B', 'x') | center(9) }} {{ '  t  ' | trim }}|{{ 'x' * 3 }}|{{ "ÄÖü" | lower }} {{ 'title case' | title }} {{ 'a b' | wordcount }}
{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='role') | unique | list }} {{ messages[-1].content.startswith('  It') }}
{% with a = 1, b = 2 %}{{ a + b }}{% endwith %} {{ (1, 2) }} {{ undefined_var is defined }} {{ undefined_var | default('d') }} {{ none is none }}
{% filter upper %}filtered {{ 1 ~ 2 }}{% endfilter %} {% raw %}{{ not rendered }}{% endraw %} {{ 1 if true else 2 }} {{ 'a' in 'cat' }} {{ 3 in xs }}""")
    put("jinja", "macros-and-errors", """{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{{ caller() if caller is defined }}{% endmacro %}
{{ greet('you') }} {{ greet(name='x', punct='?') }}
{% call greet('caller') %} from the call block{% endcall %}
{% for m in messages recursive %}{{ m.role }}{% endfor %}
{% if messages | length > 100 %}{{ raise_exception('too many messages') }}{% endif %}
{{ tools[0].function.parameters.properties.keys() | list }} {{ tools[0]['function']['name'] | capitalize }}
{%- set d = {'b': 2, 'a': 1} %}{{ d.get('a') }} {{ d.items() | list }} {{ d | dictsort(reverse=true) }} {{ [1, [2, 3]] | tojson }}""")
    put("jinja", "syntax-error", "{% for x in %}{{ x }{% endif %}")
    put("jinja", "runaway", "{% for i in range(1000000000) %}{{ i }}{% endfor %}")


if __name__ == "__main__":
    http_seeds()
    openai_seeds()
    gguf_seeds()
    safetensors_seeds()
    tokenizer_json_seeds()
    vocab_seeds()
    jinja_seeds()
