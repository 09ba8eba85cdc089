// libFuzzer targets: each takes one input and runs it through a parser or loader that reads
// untrusted bytes (HTTP requests, request JSON, GGUF and safetensors files, tokenizer files, chat
// templates, grammars and JSON Schemas), then checks what the code promises (no crash, errors that
// say something, the same result whatever way the bytes are split). A broken promise aborts with a
// message.
//
// Each target is built twice: with -DSTRATA_FUZZ=ON (clang) as a libFuzzer binary fuzz_<name>
// (libfuzzer_main.cpp), and in every build into fuzz_replay_tests, which runs each file under
// tests/fuzz/<name>/ (the seed corpus and the inputs of crashes found and fixed) through it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.h"

namespace strata::fuzz {

int http_request(const uint8_t* data, size_t size);
int openai_request(const uint8_t* data, size_t size);
int gguf(const uint8_t* data, size_t size);
int safetensors(const uint8_t* data, size_t size);
int tokenizer_json(const uint8_t* data, size_t size);
int vocab(const uint8_t* data, size_t size);
int jinja(const uint8_t* data, size_t size);
int grammar(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the corpus directory tests/fuzz/<name>/
  int (*run)(const uint8_t* data, size_t size);
};

inline constexpr Target kTargets[] = {
    {"http_request", http_request},
    {"openai_request", openai_request},
    {"gguf", gguf},
    {"safetensors", safetensors},
    {"tokenizer_json", tokenizer_json},
    {"vocab", vocab},
    {"jinja", jinja},
    {"grammar", grammar},
};

}  // namespace strata::fuzz

// Aborts (a finding for libFuzzer, a failure for the replay test) when a promise is broken.
#define STRATA_FUZZ_CHECK(cond) STRATA_CHECK(cond) << "fuzz target promise broken: "
