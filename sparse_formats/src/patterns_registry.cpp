// The named patterns of PATTERN-SPEC: parameters, defaults, meanings and references (what
// `spattn patterns` lists), and the typed parsing of parameter values.
#include "patterns_registry.hpp"

#include "patterns_internal.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <locale>
#include <sstream>

namespace sparse_formats::patterns_internal {

namespace {

using T = ParamType;

std::vector<PatternDef> make_registry() {
  std::vector<PatternDef> table = {
      {"bigbird",
       "block-level window + global + seeded random blocks",
       "Zaheer et al. 2020, Big Bird: Transformers for Longer Sequences (ITC)",
       "bigbird:w=3,g=2,r=3,block=64,seed=7",
       {{"block", T::integer, "64", "block size in elements (rows and columns)"},
        {"w", T::integer, "1", "window blocks on each side of the query's block"},
        {"g", T::integer, "2", "global blocks (attend all, attended by all)"},
        {"r", T::integer, "3", "random key blocks per query block"},
        {"seed", T::uint64, "0", "random seed"}}},
      {"causal",
       "autoregressive: j <= i + seqlen_k - seqlen_q (bottom-right aligned)",
       "Vaswani et al. 2017; rectangular alignment as in FlashAttention 2.1+",
       "causal",
       {}},
      {"dilated_window",
       "w keys on each side spaced dilation apart",
       "Beltagy et al. 2020, Longformer (dilated sliding window)",
       "dilated_window:w=32,dilation=4",
       {{"w", T::integer, "64", "attended keys on each side"},
        {"dilation", T::integer, "2", "spacing between attended keys"},
        {"causal", T::boolean, "0", "only keys at or before the query"}}},
      {"documents",
       "block-diagonal packed documents (varlen), optionally causal in each",
       "packed variable-length batches (FlashAttention varlen, cu_seqlens)",
       "documents:lengths=100/200/300,causal=1",
       {{"lengths", T::int_list, "",
         "query length of each document, '/'-separated; absent: "
         "num_docs near-equal documents"},
        {"lengths_k", T::int_list, "",
         "key length of each document (rectangular masks); "
         "absent: lengths"},
        {"num_docs", T::integer, "4", "documents of near-equal length when lengths is absent"},
        {"causal", T::boolean, "0", "causal inside each document (bottom-right aligned)"}}},
      {"fixed",
       "own stride-block plus the last c keys of every stride-block",
       "Child et al. 2019, Generating Long Sequences with Sparse Transformers (fixed)",
       "fixed:stride=128,c=8",
       {{"stride", T::integer, "128", "block length l"},
        {"c", T::integer, "8", "summary keys at the end of each block, 0 <= c <= stride"},
        {"causal", T::boolean, "1", "only keys at or before the query (the paper's setting)"}}},
      {"full",
       "dense: every pair attends",
       "Vaswani et al. 2017, Attention Is All You Need",
       "full",
       {}},
      {"global_window",
       "sliding window plus g global tokens",
       "Beltagy et al. 2020, Longformer (global + sliding window attention)",
       "global_window:w=128,g=4",
       {{"w", T::integer, "128", "attended keys on each side"},
        {"g", T::integer, "1", "global tokens 0..g-1 (attend all, attended by all)"},
        {"causal", T::boolean, "0", "only keys at or before the query"}}},
      {"prefix_lm",
       "bidirectional prefix of p keys, causal after it",
       "Raffel et al. 2020 (T5 prefix LM); Dong et al. 2019 (UniLM)",
       "prefix_lm:p=512",
       {{"p", T::integer, "256", "prefix length, visible to every query"}}},
      {"random",
       "each pair independently with probability p",
       "uniform random mask (the unstructured case of the I/O lower bound)",
       "random:p=0.05,seed=1",
       {{"p", T::real, "0.05", "probability that a pair attends (the density)"},
        {"seed", T::uint64, "0", "random seed"},
        {"causal", T::boolean, "0", "only keys at or before the query"}}},
      {"random_blocks",
       "each block independently with probability p",
       "random block-sparse mask (block-sparse kernel benchmarks)",
       "random_blocks:block=64,p=0.1,seed=3",
       {{"block", T::integer, "64", "block size (rows and columns)"},
        {"block_m", T::integer, "", "block rows; absent: block"},
        {"block_n", T::integer, "", "block columns; absent: block"},
        {"p", T::real, "0.1", "probability that a block is kept (the block density)"},
        {"seed", T::uint64, "0", "random seed"}}},
      {"sliding_window",
       "w keys on each side of the query (or w before it when causal)",
       "Beltagy et al. 2020, Longformer; FlashAttention window_size",
       "sliding_window:w=128,causal=1",
       {{"w", T::integer, "128", "attended keys on each side"},
        {"causal", T::boolean, "0", "only keys at or before the query"}}},
      {"strided",
       "previous stride keys plus every stride-th key",
       "Child et al. 2019, Generating Long Sequences with Sparse Transformers (strided)",
       "strided:stride=64",
       {{"stride", T::integer, "128", "stride l"},
        {"causal", T::boolean, "1", "only keys at or before the query (the paper's setting)"}}},
  };
  std::sort(table.begin(), table.end(),
            [](const PatternDef& a, const PatternDef& b) { return std::string(a.name) < b.name; });
  return table;
}

[[noreturn]] void fail_value(const std::string& text, const ValueContext& where, const char* what) {
  fail("pattern spec '", where.quoted, "': ", where.pattern, ": ", where.key, " = '", text,
       "' is not ", what);
}

}  // namespace

const std::vector<PatternDef>& pattern_registry() {
  static const std::vector<PatternDef> table = make_registry();
  return table;
}

const PatternDef* find_pattern(const std::string& name) {
  for (const auto& pattern : pattern_registry()) {
    if (name == pattern.name) return &pattern;
  }
  return nullptr;
}

std::string valid_pattern_names() {
  std::string names;
  for (const auto& pattern : pattern_registry())
    names += (names.empty() ? "" : ", ") + std::string(pattern.name);
  return names;
}

std::string valid_keys(const PatternDef& pattern) {
  std::vector<std::string> keys;
  for (const auto& param : pattern.params) keys.emplace_back(param.key);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + key;
  return out.empty() ? "none" : out;
}

const char* type_name(ParamType type) {
  switch (type) {
    case T::integer:
      return "int";
    case T::uint64:
      return "uint64";
    case T::boolean:
      return "bool";
    case T::real:
      return "real";
    case T::int_list:
      return "int list";
  }
  return "?";
}

int64_t parse_int_value(const std::string& text, const ValueContext& where) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range)
    fail_value(text, where, "within the 64-bit integer range");
  if (error != std::errc() || end != text.data() + text.size())
    fail_value(text, where, "an integer");
  return value;
}

uint64_t parse_uint64_value(const std::string& text, const ValueContext& where) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) fail_value(text, where, "within [0, 2^64)");
  if (error != std::errc() || end != text.data() + text.size()) {
    fail_value(text, where, "a non-negative integer");
  }
  return value;
}

bool parse_bool_value(const std::string& text, const ValueContext& where) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  fail_value(text, where, "a boolean (0, 1, false or true)");
}

double parse_real_value(const std::string& text, const ValueContext& where) {
  // The classic locale: "0.05" means the same in every user's locale.
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  double value = 0.0;
  in >> value;
  if (in.fail() || in.peek() != std::char_traits<char>::eof() || !std::isfinite(value)) {
    fail_value(text, where, "a finite real number");
  }
  return value;
}

std::vector<int64_t> parse_int_list_value(const std::string& text, const ValueContext& where) {
  std::vector<int64_t> values;
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(text.find('/', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    if (item.empty()) fail_value(text, where, "a '/'-separated integer list (an item is empty)");
    int64_t value = 0;
    const auto [stop, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || stop != item.data() + item.size()) {
      fail("pattern spec '", where.quoted, "': ", where.pattern, ": ", where.key, " item ",
           values.size(), " = '", item, "' is not a 64-bit integer");
    }
    values.push_back(value);
    if (end == text.size()) return values;
    begin = end + 1;
  }
}

void check_leaf(const PatternSpec& leaf, const std::string& quoted) {
  const PatternDef* pattern = find_pattern(leaf.name);
  if (pattern == nullptr) {
    fail("pattern spec '", quoted, "': unknown pattern '", leaf.name,
         "' (valid: ", valid_pattern_names(), "; combine with | and &)");
  }
  if (!leaf.operands.empty()) {
    fail("pattern spec '", quoted, "': ", leaf.name, " is not a composition but has ",
         leaf.operands.size(), " operands");
  }
  for (const auto& entry : leaf.params) {
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    const auto def = std::find_if(pattern->params.begin(), pattern->params.end(),
                                  [&](const ParamDef& param) { return key == param.key; });
    if (def == pattern->params.end()) {
      fail("pattern spec '", quoted, "': unknown key '", key, "' for ", pattern->name,
           " (valid keys: ", valid_keys(*pattern), ")");
    }
    const ValueContext where{quoted, pattern->name, def->key};
    switch (def->type) {
      case T::integer:
        parse_int_value(value, where);
        break;
      case T::uint64:
        parse_uint64_value(value, where);
        break;
      case T::boolean:
        parse_bool_value(value, where);
        break;
      case T::real:
        parse_real_value(value, where);
        break;
      case T::int_list:
        parse_int_list_value(value, where);
        break;
    }
  }
}

}  // namespace sparse_formats::patterns_internal

namespace sparse_formats {

std::vector<PatternInfo> list_patterns() {
  std::vector<PatternInfo> infos;
  for (const auto& pattern : patterns_internal::pattern_registry()) {
    PatternInfo info{pattern.name, pattern.description, pattern.reference, pattern.example, {}};
    for (const auto& param : pattern.params) {
      info.params.push_back({param.key, patterns_internal::type_name(param.type),
                             param.default_value, param.meaning});
    }
    infos.push_back(std::move(info));
  }
  return infos;
}

}  // namespace sparse_formats
