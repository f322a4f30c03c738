// From a PatternSpec to a mask: reads each parameter (or its default) with its type and calls the
// generator, which checks the value ranges. Compositions fold with pattern_union / _intersection.
#include <sparse_formats/error.hpp>

#include "format_internal.hpp"
#include "patterns_registry.hpp"

#include <algorithm>
#include <new>

namespace sparse_formats {

using namespace patterns_internal;

namespace {

// Typed access to one leaf's parameters, falling back to the table's defaults.
class ParamReader {
 public:
  ParamReader(const PatternSpec& leaf, const PatternDef& def, const std::string& quoted)
      : leaf_(leaf), def_(def), quoted_(quoted) {}

  bool has(const char* key) const { return leaf_.params.count(key) != 0; }
  int64_t integer(const char* key) const { return parse_int_value(text(key), where(key)); }
  uint64_t uint64(const char* key) const { return parse_uint64_value(text(key), where(key)); }
  bool boolean(const char* key) const { return parse_bool_value(text(key), where(key)); }
  double real(const char* key) const { return parse_real_value(text(key), where(key)); }
  std::vector<int64_t> list(const char* key) const {
    return has(key) ? parse_int_list_value(text(key), where(key)) : std::vector<int64_t>{};
  }

 private:
  std::string text(const char* key) const {
    const auto it = leaf_.params.find(key);
    if (it != leaf_.params.end()) return it->second;
    for (const auto& param : def_.params) {
      if (std::string(param.key) == key) return param.default_value;
    }
    return "";
  }
  ValueContext where(const char* key) const { return {quoted_, def_.name, key}; }

  const PatternSpec& leaf_;
  const PatternDef& def_;
  const std::string& quoted_;
};

template <typename Index>
CsrPattern<Index> make_documents(const ParamReader& in, int64_t seqlen_q, int64_t seqlen_k) {
  const bool causal = in.boolean("causal");
  if (in.has("lengths")) {
    if (in.has("num_docs")) fail("documents: give lengths or num_docs, not both");
    return documents_pattern<Index>(seqlen_q, seqlen_k, in.list("lengths"), in.list("lengths_k"),
                                    causal);
  }
  if (in.has("lengths_k")) fail("documents: lengths_k needs lengths (the query lengths)");
  const int64_t num_docs = in.integer("num_docs");
  const std::vector<int64_t> lengths = even_lengths(seqlen_q, num_docs);
  const std::vector<int64_t> lengths_k =
      seqlen_q == seqlen_k ? std::vector<int64_t>{} : even_lengths(seqlen_k, num_docs);
  return documents_pattern<Index>(seqlen_q, seqlen_k, lengths, lengths_k, causal);
}

template <typename Index>
CsrPattern<Index> make_leaf(const PatternSpec& leaf, const std::string& quoted, int64_t seqlen_q,
                            int64_t seqlen_k) {
  check_leaf(leaf, quoted);
  const PatternDef& def = *find_pattern(leaf.name);
  const ParamReader in(leaf, def, quoted);
  const std::string& name = leaf.name;
  if (name == "full") return full_pattern<Index>(seqlen_q, seqlen_k);
  if (name == "causal") return causal_pattern<Index>(seqlen_q, seqlen_k);
  if (name == "sliding_window") {
    return sliding_window_pattern<Index>(seqlen_q, seqlen_k, in.integer("w"), in.boolean("causal"));
  }
  if (name == "dilated_window") {
    return dilated_window_pattern<Index>(seqlen_q, seqlen_k, in.integer("w"),
                                         in.integer("dilation"), in.boolean("causal"));
  }
  if (name == "global_window") {
    return global_window_pattern<Index>(seqlen_q, seqlen_k, in.integer("w"), in.integer("g"),
                                        in.boolean("causal"));
  }
  if (name == "strided") {
    return strided_pattern<Index>(seqlen_q, seqlen_k, in.integer("stride"), in.boolean("causal"));
  }
  if (name == "fixed") {
    return fixed_pattern<Index>(seqlen_q, seqlen_k, in.integer("stride"), in.integer("c"),
                                in.boolean("causal"));
  }
  if (name == "bigbird") {
    const BigBirdParams params{in.integer("block"), in.integer("w"), in.integer("g"),
                               in.integer("r"), in.uint64("seed")};
    return bigbird_pattern<Index>(seqlen_q, seqlen_k, params);
  }
  if (name == "documents") return make_documents<Index>(in, seqlen_q, seqlen_k);
  if (name == "prefix_lm") return prefix_lm_pattern<Index>(seqlen_q, seqlen_k, in.integer("p"));
  if (name == "random") {
    return random_pattern<Index>(seqlen_q, seqlen_k, in.real("p"), in.uint64("seed"),
                                 in.boolean("causal"));
  }
  if (name == "random_blocks") {
    const int64_t block = in.integer("block");
    const int64_t block_m = in.has("block_m") ? in.integer("block_m") : block;
    const int64_t block_n = in.has("block_n") ? in.integer("block_n") : block;
    return random_blocks_pattern<Index>(seqlen_q, seqlen_k, block_m, block_n, in.real("p"),
                                        in.uint64("seed"));
  }
  fail("pattern spec '", quoted, "': pattern '", name, "' has no generator");  // table out of sync
}

template <typename Index>
CsrPattern<Index> make_node(const PatternSpec& spec, const std::string& quoted, int64_t seqlen_q,
                            int64_t seqlen_k) {
  if (!spec.is_composite()) return make_leaf<Index>(spec, quoted, seqlen_q, seqlen_k);
  if (spec.operands.empty()) fail("pattern spec '", quoted, "': ", spec.name, " has no operands");
  if (!spec.params.empty()) fail("pattern spec '", quoted, "': ", spec.name, " takes no keys");
  CsrPattern<Index> result = make_node<Index>(spec.operands[0], quoted, seqlen_q, seqlen_k);
  for (size_t k = 1; k < spec.operands.size(); ++k) {
    const CsrPattern<Index> next = make_node<Index>(spec.operands[k], quoted, seqlen_q, seqlen_k);
    result = spec.name == "union" ? pattern_union(result.view(), next.view())
                                  : pattern_intersection(result.view(), next.view());
  }
  return result;
}

}  // namespace

template <typename Index>
CsrPattern<Index> make_pattern(const PatternSpec& spec, int64_t seqlen_q, int64_t seqlen_k) {
  const std::string text = format_pattern_spec(spec);
  // Every pattern holds seqlen_q + 1 row offsets, whatever it attends: refused by its size when the
  // machine cannot hold them, and a generator that runs out of memory later says what it was asked.
  if (seqlen_q >= 0) {
    internal::check_allocation<Index>("make_pattern", [&] { return "'" + text + "': row_ptr (seqlen_q + 1 offsets)"; },
                                      internal::saturating_plus_one(seqlen_q));
  }
  try {
    return make_node<Index>(spec, text, seqlen_q, seqlen_k);
  } catch (const std::bad_alloc&) {
    fail("make_pattern: '", text, "' at ", seqlen_q, " x ", seqlen_k,
         " does not fit in memory (std::bad_alloc; the limit is ", internal::memory_limit_bytes(),
         " bytes of physical memory)");
  }
}

PatternSpec with_defaults(const PatternSpec& spec) {
  PatternSpec out = spec;
  if (spec.is_composite()) {
    for (auto& operand : out.operands) operand = with_defaults(operand);
    return out;
  }
  check_leaf(spec, format_pattern_spec(spec));
  // documents: num_docs only applies without lengths (both together are refused).
  const bool skip_num_docs = spec.name == "documents" && spec.params.count("lengths") != 0;
  for (const auto& param : find_pattern(spec.name)->params) {
    if (param.default_value[0] == '\0') continue;  // absent by default
    if (skip_num_docs && std::string(param.key) == "num_docs") continue;
    out.params.emplace(param.key, param.default_value);
  }
  return out;
}

template CsrPattern<int32_t> make_pattern<int32_t>(const PatternSpec&, int64_t, int64_t);
template CsrPattern<int64_t> make_pattern<int64_t>(const PatternSpec&, int64_t, int64_t);

}  // namespace sparse_formats
