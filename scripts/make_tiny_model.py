#!/usr/bin/env python3
"""Writes models/strata-tiny: a small Llama config (random weights via --load-format dummy) and a
byte-level BPE tokenizer with no merges (every byte is a token), so that Strata runs out of the box
with no downloads. Re-run to regenerate; the output is committed."""
import json
import os

out = os.path.join(os.path.dirname(__file__), "..", "models", "strata-tiny")
os.makedirs(out, exist_ok=True)

# GPT-2's reversible byte -> printable character map (the ByteLevel pre-tokenizer's alphabet).
printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
chars = {}
n = 0
for b in range(256):
    if b in printable:
        chars[b] = chr(b)
    else:
        chars[b] = chr(256 + n)
        n += 1
vocab = {chars[b]: b for b in range(256)}
specials = ["<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|system|>"]
for i, s in enumerate(specials):
    vocab[s] = 256 + i

tokenizer = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {"id": 256 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, s in enumerate(specials)
    ],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": True},
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [256], "tokens": ["<|bos|>"]}},
    },
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
              "ignore_merges": False, "vocab": vocab, "merges": []},
}
chat_template = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|eos|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
tokenizer_config = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<|bos|>",
    "eos_token": "<|eos|>",
    "pad_token": None,
    "tokenizer_class": "PreTrainedTokenizerFast",
    "model_max_length": 4096,
    "clean_up_tokenization_spaces": False,
    "chat_template": chat_template,
}
config = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 261,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "bos_token_id": 256,
    "eos_token_id": 257,
    "torch_dtype": "bfloat16",
}
generation_config = {"bos_token_id": 256, "eos_token_id": 257}

def write(name, obj):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")

write("tokenizer.json", tokenizer)
write("tokenizer_config.json", tokenizer_config)
write("config.json", config)
write("generation_config.json", generation_config)
