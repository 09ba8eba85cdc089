// A reader for SentencePiece's tokenizer.model (a ModelProto protobuf): the scored pieces and the
// trainer/normalizer settings tokenization depends on. Hand-written protobuf wire-format decoding;
// unknown fields are skipped, malformed data is a DataLoss error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/sp_models.h"

namespace strata::tok {

struct SpModelProto {
  std::vector<SpPiece> pieces;
  int model_type = 1;  // TrainerSpec.ModelType: 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR
  int32_t vocab_size = 0;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// `what` names the file in error messages.
Result<SpModelProto> parse_sentencepiece_model(std::string_view data, const std::string& what);

}  // namespace strata::tok
