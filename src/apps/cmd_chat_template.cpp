// `strata chat-template MODEL_OR_TOKENIZER_DIR --messages conversation.json`: prints the prompt the
// model's chat template makes of a conversation, byte for byte as transformers'
// apply_chat_template(tokenize=False) does (no newline is added after it).
// `--tokenizer-mode deepseek_v4` uses the DeepSeek-V4 encoder instead of a template (no model
// directory needed); --kwargs '{"thinking": false}' and --reasoning-effort set its mode.
#include <chrono>
#include <iostream>
#include <iterator>

#include "apps/command.h"
#include "core/file_util.h"
#include "core/json.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/deepseek_v4_encoding.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add({.name = "messages",
         .help = "conversation: a JSON file (or - for stdin) holding an array of messages or an "
                 "object with \"messages\" (and optionally \"tools\")",
         .metavar = "FILE"});
  o.add_bool("add-generation-prompt", false, "end with the header of a new assistant turn");
  o.add_bool("continue-final-message", false,
             "leave the final message open so the model continues it");
  o.add({.name = "tools", .help = "JSON file with an array of tool schemas", .metavar = "FILE"});
  o.add({.name = "chat-template",
         .help = "chat template to use instead of the model's: a file, or the template text",
         .metavar = "FILE"});
  o.add({.name = "chat-template-name",
         .help = "which named template of tokenizer_config.json to use (default: \"default\")",
         .metavar = "NAME"});
  o.add({.name = "kwargs",
         .help = "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'",
         .metavar = "JSON"});
  o.add_string("tokenizer-mode", "auto",
               "auto: the model's chat template; deepseek_v4: the DeepSeek-V4 encoder (no "
               "template, MODEL_OR_TOKENIZER_DIR optional)");
  o.add({.name = "reasoning-effort",
         .help = "deepseek_v4 mode: the request's reasoning_effort (none, high, max, ...)",
         .metavar = "EFFORT"});
  o.add_int("repeat", 1,
            "render this many times and print the time per render to stderr (a benchmark)");
}

Result<OrderedJson> read_json_arg(const std::string& path, const std::string& what) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    STRATA_ASSIGN_OR_RETURN(text, read_file(path));
  }
  return parse_ordered_json(text, what + " '" + path + "'");
}

int fail(const Status& s) {
  std::cerr << "strata chat-template: " << s.message() << "\n";
  return 1;
}

// --tokenizer-mode deepseek_v4: the DeepSeek-V4 encoder's prompt.
Result<std::string> encode_v4(const Args& args, const OrderedJson& messages,
                              const OrderedJson& tools, const OrderedJson& kwargs) {
  OrderedJson effort;
  if (args.is_set("reasoning-effort")) effort = args.get("reasoning-effort");
  STRATA_ASSIGN_OR_RETURN(
      DeepseekV4Mode mode,
      deepseek_v4_mode(kwargs.is_null() ? nullptr : &kwargs, effort.is_null() ? nullptr : &effort));
  DeepseekV4Inputs in;
  in.messages = &messages;
  in.tools = tools.is_null() ? nullptr : &tools;
  in.mode = mode;
  in.add_generation_prompt = args.get_bool("add-generation-prompt");
  in.continue_final_message = args.get_bool("continue-final-message");
  return encode_deepseek_v4(in);
}

int run(const Args& args) {
  const std::string mode = args.get("tokenizer-mode");
  if (mode != "auto" && mode != "deepseek_v4") {
    std::cerr << "strata chat-template: --tokenizer-mode must be auto or deepseek_v4, got '" << mode
              << "'\n";
    return 2;
  }
  const bool v4 = mode == "deepseek_v4";
  if (args.positional().size() != 1 && !(v4 && args.positional().empty())) {
    std::cerr << "strata chat-template: expected one MODEL_OR_TOKENIZER_DIR (a directory with "
                 "tokenizer_config.json, a tokenizer_config.json or a .gguf file)\n";
    return 2;
  }
  if (!args.is_set("messages")) {
    std::cerr << "strata chat-template: --messages FILE is required\n";
    return 2;
  }
  Result<ChatTemplate> tmpl = invalid_argument("no chat template in deepseek_v4 mode");
  if (!v4) {
    tmpl = load_chat_template(args.positional()[0], args.get("chat-template"),
                              args.get("chat-template-name"));
    if (!tmpl.ok()) return fail(tmpl.status());
  }

  auto conversation = read_json_arg(args.get("messages"), "--messages");
  if (!conversation.ok()) return fail(conversation.status());
  OrderedJson messages;
  OrderedJson tools;
  if (conversation->is_object()) {
    if (!conversation->contains("messages")) {
      return fail(invalid_argument("--messages: the JSON object has no \"messages\" field"));
    }
    messages = (*conversation)["messages"];
    if (conversation->contains("tools")) tools = (*conversation)["tools"];
  } else {
    messages = std::move(conversation).value();
  }
  if (args.is_set("tools")) {
    auto t = read_json_arg(args.get("tools"), "--tools");
    if (!t.ok()) return fail(t.status());
    tools = std::move(t).value();
  }
  OrderedJson kwargs;
  if (args.is_set("kwargs")) {
    auto k = parse_ordered_json(args.get("kwargs"), "--kwargs");
    if (!k.ok()) return fail(k.status());
    kwargs = std::move(k).value();
    if (!kwargs.is_object()) return fail(invalid_argument("--kwargs must be a JSON object"));
  }
  if (v4) {
    auto prompt = encode_v4(args, messages, tools, kwargs);
    if (!prompt.ok()) return fail(prompt.status());
    std::cout << *prompt << std::flush;
    return 0;
  }
  ChatTemplateInputs in;
  in.messages = &messages;
  in.tools = tools.is_null() ? nullptr : &tools;
  in.add_generation_prompt = args.get_bool("add-generation-prompt");
  in.continue_final_message = args.get_bool("continue-final-message");
  in.extra_kwargs = kwargs.is_null() ? nullptr : &kwargs;
  auto start = std::chrono::steady_clock::now();
  auto prompt = tmpl->render(in);
  if (!prompt.ok()) return fail(prompt.status());
  int64_t repeat = args.get_int("repeat");
  for (int64_t i = 1; i < repeat; ++i) prompt = tmpl->render(in);
  if (repeat > 1) {
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "rendered " << repeat << " times: " << us / static_cast<double>(repeat)
              << " us per render (" << prompt->size() << " bytes, " << messages.size()
              << " messages)\n";
  }
  std::cout << *prompt << std::flush;
  return 0;
}

}  // namespace

STRATA_REGISTER_COMMAND(kChatTemplateCommand, "chat-template",
                        "MODEL_OR_TOKENIZER_DIR --messages FILE [options]",
                        "print the prompt a model's chat template makes of a conversation",
                        add_options, run);

}  // namespace strata::apps
