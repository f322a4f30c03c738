// From a PatternSpec to a mask: reads each parameter (or its default) with its type and calls the
// generator, which checks the value ranges. Compositions fold with pattern_union / _intersection.
#include <sparse_formats/error.hpp>
#include <sparse_formats/intervals.hpp>

#include "format_internal.hpp"
#include "patterns_internal.hpp"
#include "patterns_registry.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <string>
#include <utility>

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

// The two forms a spec is built in. Each names the generators of one form; make_leaf reads a
// leaf's parameters once for both.
template <typename Index>
struct CsrForm {
  using Result = CsrPattern<Index>;
  static Result full(int64_t q, int64_t k) { return full_pattern<Index>(q, k); }
  static Result causal(int64_t q, int64_t k) { return causal_pattern<Index>(q, k); }
  static Result sliding_window(int64_t q, int64_t k, int64_t w, bool c) { return sliding_window_pattern<Index>(q, k, w, c); }
  static Result dilated_window(int64_t q, int64_t k, int64_t w, int64_t d, bool c) {
    return dilated_window_pattern<Index>(q, k, w, d, c);
  }
  static Result global_window(int64_t q, int64_t k, int64_t w, int64_t g, bool c) {
    return global_window_pattern<Index>(q, k, w, g, c);
  }
  static Result strided(int64_t q, int64_t k, int64_t stride, bool c) { return strided_pattern<Index>(q, k, stride, c); }
  static Result fixed(int64_t q, int64_t k, int64_t stride, int64_t c, bool causal) {
    return fixed_pattern<Index>(q, k, stride, c, causal);
  }
  static Result bigbird(int64_t q, int64_t k, const BigBirdParams& params) { return bigbird_pattern<Index>(q, k, params); }
  static Result documents(int64_t q, int64_t k, const std::vector<int64_t>& lengths,
                          const std::vector<int64_t>& lengths_k, bool c) {
    return documents_pattern<Index>(q, k, lengths, lengths_k, c);
  }
  static Result prefix_lm(int64_t q, int64_t k, int64_t p) { return prefix_lm_pattern<Index>(q, k, p); }
  static Result random(int64_t q, int64_t k, double p, uint64_t seed, bool c) { return random_pattern<Index>(q, k, p, seed, c); }
  static Result random_blocks(int64_t q, int64_t k, int64_t bm, int64_t bn, double p, uint64_t seed) {
    return random_blocks_pattern<Index>(q, k, bm, bn, p, seed);
  }
  static Result combine(const std::string& op, const Result& a, const Result& b) {
    return op == "union" ? pattern_union(a.view(), b.view()) : pattern_intersection(a.view(), b.view());
  }
  static bool absent(const Result&) { return false; }
};

// Interval forms; std::nullopt for element-wise masks (random) and rows of short runs.
struct IntervalForm {
  using Result = std::optional<IntervalPattern>;
  static Result full(int64_t q, int64_t k) { return full_intervals(q, k); }
  static Result causal(int64_t q, int64_t k) { return causal_intervals(q, k); }
  static Result sliding_window(int64_t q, int64_t k, int64_t w, bool c) { return sliding_window_intervals(q, k, w, c); }
  static Result dilated_window(int64_t q, int64_t k, int64_t w, int64_t d, bool c) {
    return dilated_window_intervals(q, k, w, d, c);
  }
  static Result global_window(int64_t q, int64_t k, int64_t w, int64_t g, bool c) {
    return global_window_intervals(q, k, w, g, c);
  }
  static Result strided(int64_t q, int64_t k, int64_t stride, bool c) { return strided_intervals(q, k, stride, c); }
  static Result fixed(int64_t q, int64_t k, int64_t stride, int64_t c, bool causal) {
    return fixed_intervals(q, k, stride, c, causal);
  }
  static Result bigbird(int64_t q, int64_t k, const BigBirdParams& params) { return bigbird_intervals(q, k, params); }
  static Result documents(int64_t q, int64_t k, const std::vector<int64_t>& lengths,
                          const std::vector<int64_t>& lengths_k, bool c) {
    return documents_intervals(q, k, lengths, lengths_k, c);
  }
  static Result prefix_lm(int64_t q, int64_t k, int64_t p) { return prefix_lm_intervals(q, k, p); }
  static Result random(int64_t, int64_t, double, uint64_t, bool) { return std::nullopt; }
  static Result random_blocks(int64_t q, int64_t k, int64_t bm, int64_t bn, double p, uint64_t seed) {
    return random_blocks_intervals(q, k, bm, bn, p, seed);
  }
  static Result combine(const std::string& op, const Result& a, const Result& b) {
    return op == "union" ? interval_union(*a, *b) : interval_intersection(*a, *b);
  }
  static bool absent(const Result& r) { return !r.has_value(); }
};

template <typename Form>
typename Form::Result make_documents(const ParamReader& in, int64_t seqlen_q, int64_t seqlen_k) {
  const bool causal = in.boolean("causal");
  if (in.has("lengths")) {
    if (in.has("num_docs")) fail("documents: give lengths or num_docs, not both");
    return Form::documents(seqlen_q, seqlen_k, in.list("lengths"), in.list("lengths_k"), causal);
  }
  if (in.has("lengths_k")) fail("documents: lengths_k needs lengths (the query lengths)");
  const int64_t num_docs = in.integer("num_docs");
  const std::vector<int64_t> lengths = even_lengths(seqlen_q, num_docs);
  const std::vector<int64_t> lengths_k =
      seqlen_q == seqlen_k ? std::vector<int64_t>{} : even_lengths(seqlen_k, num_docs);
  return Form::documents(seqlen_q, seqlen_k, lengths, lengths_k, causal);
}

// The blocks of a block pattern leaf (bigbird: block x block; random_blocks: block_m x block_n,
// each defaulting to block).
std::pair<int64_t, int64_t> leaf_block_size(const PatternSpec& leaf, const ParamReader& in) {
  const int64_t block = in.integer("block");
  if (leaf.name == "bigbird") return {block, block};
  return {in.has("block_m") ? in.integer("block_m") : block, in.has("block_n") ? in.integer("block_n") : block};
}

template <typename Form>
typename Form::Result make_leaf(const PatternSpec& leaf, const std::string& quoted, int64_t seqlen_q,
                                int64_t seqlen_k) {
  check_leaf(leaf, quoted);
  const PatternDef& def = *find_pattern(leaf.name);
  const ParamReader in(leaf, def, quoted);
  const std::string& name = leaf.name;
  if (name == "full") return Form::full(seqlen_q, seqlen_k);
  if (name == "causal") return Form::causal(seqlen_q, seqlen_k);
  if (name == "sliding_window") return Form::sliding_window(seqlen_q, seqlen_k, in.integer("w"), in.boolean("causal"));
  if (name == "dilated_window") {
    return Form::dilated_window(seqlen_q, seqlen_k, in.integer("w"), in.integer("dilation"), in.boolean("causal"));
  }
  if (name == "global_window") {
    return Form::global_window(seqlen_q, seqlen_k, in.integer("w"), in.integer("g"), in.boolean("causal"));
  }
  if (name == "strided") return Form::strided(seqlen_q, seqlen_k, in.integer("stride"), in.boolean("causal"));
  if (name == "fixed") {
    return Form::fixed(seqlen_q, seqlen_k, in.integer("stride"), in.integer("c"), in.boolean("causal"));
  }
  if (name == "bigbird") {
    const BigBirdParams params{in.integer("block"), in.integer("w"), in.integer("g"),
                               in.integer("r"), in.uint64("seed")};
    return Form::bigbird(seqlen_q, seqlen_k, params);
  }
  if (name == "documents") return make_documents<Form>(in, seqlen_q, seqlen_k);
  if (name == "prefix_lm") return Form::prefix_lm(seqlen_q, seqlen_k, in.integer("p"));
  if (name == "random") return Form::random(seqlen_q, seqlen_k, in.real("p"), in.uint64("seed"), in.boolean("causal"));
  if (name == "random_blocks") {
    const auto [block_m, block_n] = leaf_block_size(leaf, in);
    return Form::random_blocks(seqlen_q, seqlen_k, block_m, block_n, in.real("p"), in.uint64("seed"));
  }
  fail("pattern spec '", quoted, "': pattern '", name, "' has no generator");  // table out of sync
}

// A composition folds its operands left to right; in interval form it is absent as soon as one
// operand is (the caller then builds the whole spec as pairs, which composes exactly).
template <typename Form>
typename Form::Result make_node(const PatternSpec& spec, const std::string& quoted, int64_t seqlen_q,
                                int64_t seqlen_k) {
  if (!spec.is_composite()) return make_leaf<Form>(spec, quoted, seqlen_q, seqlen_k);
  if (spec.operands.empty()) fail("pattern spec '", quoted, "': ", spec.name, " has no operands");
  if (!spec.params.empty()) fail("pattern spec '", quoted, "': ", spec.name, " takes no keys");
  typename Form::Result result = make_node<Form>(spec.operands[0], quoted, seqlen_q, seqlen_k);
  for (size_t k = 1; k < spec.operands.size(); ++k) {
    if (Form::absent(result)) return result;
    const typename Form::Result next = make_node<Form>(spec.operands[k], quoted, seqlen_q, seqlen_k);
    if (Form::absent(next)) return next;
    result = Form::combine(spec.name, result, next);
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
    return make_node<CsrForm<Index>>(spec, text, seqlen_q, seqlen_k);
  } catch (const std::bad_alloc&) {
    fail("make_pattern: '", text, "' at ", seqlen_q, " x ", seqlen_k,
         " does not fit in memory (std::bad_alloc; the limit is ", internal::memory_limit_bytes(),
         " bytes of physical memory)");
  }
}

std::optional<IntervalPattern> make_interval_pattern(const PatternSpec& spec, int64_t seqlen_q, int64_t seqlen_k) {
  const std::string text = format_pattern_spec(spec);
  try {
    return make_node<IntervalForm>(spec, text, seqlen_q, seqlen_k);
  } catch (const std::bad_alloc&) {
    fail("make_interval_pattern: '", text, "' at ", seqlen_q, " x ", seqlen_k,
         " does not fit in memory (std::bad_alloc; the limit is ", internal::memory_limit_bytes(),
         " bytes of physical memory)");
  }
}

std::optional<std::pair<int64_t, int64_t>> block_pattern_size(const PatternSpec& spec) {
  if (spec.is_composite() || (spec.name != "bigbird" && spec.name != "random_blocks")) return std::nullopt;
  const std::string text = format_pattern_spec(spec);
  check_leaf(spec, text);
  return leaf_block_size(spec, ParamReader(spec, *find_pattern(spec.name), text));
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
