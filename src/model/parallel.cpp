#include "model/parallel.h"

#include "core/strings.h"

namespace strata {

Result<std::vector<ShardRange>> pipeline_layer_ranges(int64_t num_layers, int pp_size,
                                                      const std::string& partition) {
  if (pp_size < 1) return invalid_argument("--pipeline-parallel-size must be at least 1");
  if (num_layers < pp_size)
    return invalid_argument("--pipeline-parallel-size " + std::to_string(pp_size) +
                            " is more than the model's " + std::to_string(num_layers) +
                            " layers: each stage needs at least one");
  std::vector<int64_t> counts;
  if (!partition.empty()) {
    for (const std::string& part : split(partition, ',')) {
      const std::string t(trim(part));
      char* end = nullptr;
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0' || v < 1)
        return invalid_argument("STRATA_PP_LAYER_PARTITION=\"" + partition +
                                "\": each entry must be a layer count >= 1, e.g. \"20,21,20\"");
      counts.push_back(v);
    }
    if (static_cast<int>(counts.size()) != pp_size)
      return invalid_argument("STRATA_PP_LAYER_PARTITION=\"" + partition + "\" has " +
                              std::to_string(counts.size()) + " entries for " +
                              std::to_string(pp_size) + " pipeline stages");
    int64_t sum = 0;
    for (int64_t c : counts) sum += c;
    if (sum != num_layers)
      return invalid_argument("STRATA_PP_LAYER_PARTITION=\"" + partition + "\" sums to " +
                              std::to_string(sum) + " layers; the model has " +
                              std::to_string(num_layers));
  } else {
    counts.assign(pp_size, num_layers / pp_size);
    const int64_t rem = num_layers % pp_size;
    for (int64_t i = 0; i < rem; ++i) {
      // Stages pp_size-2, pp_size-3, ..., 0, then the last one.
      const int64_t s = (pp_size - 2 - i + pp_size) % pp_size;
      ++counts[s];
    }
  }
  std::vector<ShardRange> out;
  int64_t begin = 0;
  for (int64_t c : counts) {
    out.push_back({begin, begin + c});
    begin += c;
  }
  return out;
}

}  // namespace strata
