// `strata tokenize` and `strata detokenize`: text <-> token ids with a model's tokenizer.
#include <iostream>

#include "apps/command.h"
#include "core/file_util.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace strata::apps {

namespace {

std::string json_string(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::shared_ptr<const Tokenizer>> tokenizer_from_args(const Args& args,
                                                             const std::string& command) {
  if (args.positional().size() != 1) {
    return invalid_argument(
        "expected one MODEL_OR_TOKENIZER_DIR (a model directory, a "
        "tokenizer.json or tokenizer.model, or a .gguf file); see `strata " +
        command + " --help`");
  }
  return Tokenizer::load(args.positional()[0]);
}

void add_tokenize_options(OptionSet& o) {
  o.add_string("text", "", "text to tokenize");
  o.add_string("file", "", "read the text to tokenize from this file");
  o.add_bool("pieces", false, "also print the token strings (a second JSON array)");
  o.add_bool("special", true,
             "add BOS/EOS as the tokenizer's post-processor says (--no-special: only the text)");
}

int run_tokenize(const Args& args) {
  auto tok = tokenizer_from_args(args, "tokenize");
  if (!tok.ok()) {
    std::cerr << "strata tokenize: " << tok.status().message() << "\n";
    return 1;
  }
  std::string text;
  if (args.is_set("file") && args.is_set("text")) {
    std::cerr << "strata tokenize: give --text or --file, not both\n";
    return 2;
  }
  if (args.is_set("file")) {
    auto data = read_file(args.get("file"));
    if (!data.ok()) {
      std::cerr << "strata tokenize: " << data.status().message() << "\n";
      return 1;
    }
    text = std::move(data).value();
  } else if (args.is_set("text")) {
    text = args.get("text");
  } else {
    std::cerr << "strata tokenize: give the text with --text or --file\n";
    return 2;
  }
  auto ids = (*tok)->encode(text, args.get_bool("special"));
  if (!ids.ok()) {
    std::cerr << "strata tokenize: " << ids.status().message() << "\n";
    return 1;
  }
  std::string id_line(1, '[');
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i) id_line += ", ";
    id_line += std::to_string((*ids)[i]);
  }
  std::cout << id_line << "]\n";
  if (args.get_bool("pieces")) {
    std::string piece_line(1, '[');
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i) piece_line += ", ";
      piece_line += json_string((*tok)->id_to_piece((*ids)[i]));
    }
    std::cout << piece_line << "]\n";
  }
  return 0;
}

void add_detokenize_options(OptionSet& o) {
  o.add_string("ids", "", "comma-separated token ids, e.g. 1,15043,3186");
  o.add_bool("skip-special-tokens", true, "leave out special tokens such as BOS/EOS");
}

int run_detokenize(const Args& args) {
  auto tok = tokenizer_from_args(args, "detokenize");
  if (!tok.ok()) {
    std::cerr << "strata detokenize: " << tok.status().message() << "\n";
    return 1;
  }
  if (!args.is_set("ids")) {
    std::cerr << "strata detokenize: give the token ids with --ids 1,2,3\n";
    return 2;
  }
  auto list = parse_int_list(args.get("ids"));
  if (!list.ok()) {
    std::cerr << "strata detokenize: --ids: " << list.status().message() << "\n";
    return 2;
  }
  std::vector<int32_t> ids;
  for (int64_t v : *list) {
    if (v < 0 || v >= (*tok)->vocab_size()) {
      std::cerr << "strata detokenize: token id " << v << " is out of range (vocabulary has "
                << (*tok)->vocab_size() << " tokens)\n";
      return 2;
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  std::cout << (*tok)->decode(ids, args.get_bool("skip-special-tokens")) << "\n";
  return 0;
}

}  // namespace

STRATA_REGISTER_COMMAND(kTokenize, "tokenize", "MODEL_OR_TOKENIZER_DIR (--text TEXT | --file F)",
                        "print the token ids of a text as a JSON array", add_tokenize_options,
                        run_tokenize);
STRATA_REGISTER_COMMAND(kDetokenize, "detokenize", "MODEL_OR_TOKENIZER_DIR --ids 1,2,3",
                        "print the text of token ids", add_detokenize_options, run_detokenize);

}  // namespace strata::apps
