// JSON: nlohmann::json (Debian's nlohmann-json3-dev). Include this only from .cpp files: it is
// heavy to compile. Parse untrusted text with parse_json(), which never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace strata {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses `text`; on error the message names `what` and the byte offset.
Result<Json> parse_json(const std::string& text, const std::string& what);
Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what);
// Reads and parses a JSON file.
Result<Json> read_json_file(const std::string& path);

}  // namespace strata
