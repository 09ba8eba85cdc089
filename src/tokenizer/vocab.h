// A token vocabulary: id -> piece and piece -> id. Ids may have holes (pieces "" there).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::tok {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Vocabularies may leave ids unused, but not many: a file that names an id far beyond its number
// of tokens is corrupt, and would size every per-id table by that id (a few bytes of JSON naming
// id 2^31 would ask for 64 GB). Loaders refuse ids at or above (number of tokens) + kMaxUnusedIds.
inline constexpr int64_t kMaxUnusedIds = int64_t{1} << 20;
inline bool plausible_max_id(int64_t max_id, size_t count) {
  return max_id < static_cast<int64_t>(count) + kMaxUnusedIds;
}

class Vocab {
 public:
  // Sets the piece of `id` (growing the table); a piece seen twice maps to the later id.
  void set(int32_t id, std::string piece) {
    if (id >= static_cast<int32_t>(pieces_.size())) pieces_.resize(id + 1);
    index_[piece] = id;
    pieces_[id] = std::move(piece);
  }
  std::optional<int32_t> find(std::string_view piece) const {
    auto it = index_.find(piece);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  const std::string& piece(int32_t id) const {
    static const std::string kEmpty;
    return id >= 0 && id < static_cast<int32_t>(pieces_.size()) ? pieces_[id] : kEmpty;
  }
  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  size_t num_pieces() const { return index_.size(); }
  void reserve(size_t n) {
    pieces_.reserve(n);
    index_.reserve(n);
  }

 private:
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> index_;
};

}  // namespace strata::tok
