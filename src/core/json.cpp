#include "core/json.h"

#include "core/file_util.h"

namespace strata {

Result<Json> parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for huge numbers
    return invalid_argument(what + " is not valid JSON: " + e.what());
  }
}

Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what) {
  try {
    return OrderedJson::parse(text);
  } catch (const OrderedJson::exception& e) {
    return invalid_argument(what + " is not valid JSON: " + e.what());
  }
}

Result<Json> read_json_file(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_json(text, "'" + path + "'");
}

}  // namespace strata
