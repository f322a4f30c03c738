// PATTERN-SPEC text: a recursive-descent parser for `name:key=value,...` leaves joined by '&'
// (intersection, binds tighter) and '|' (union) with parentheses, and the canonical printer.
#include <sparse_formats/error.hpp>

#include "patterns_registry.hpp"

#include <cctype>

namespace sparse_formats {

using namespace patterns_internal;

namespace {

constexpr int kMaxDepth = 64;  // nested parentheses; deeper specs are refused, not recursed into

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}
bool is_value_char(char c) {
  return c != ',' && c != '|' && c != '&' && c != '(' && c != ')' &&
         std::isspace(static_cast<unsigned char>(c)) == 0;
}

class SpecParser {
 public:
  explicit SpecParser(const std::string& text) : text_(text) {}

  PatternSpec parse() {
    skip_space();
    if (pos_ == text_.size()) fail("pattern spec '", text_, "': empty (expected a pattern name)");
    PatternSpec spec = parse_union(0);
    skip_space();
    if (pos_ != text_.size()) error("unexpected '" + std::string(1, text_[pos_]) + "'");
    return spec;
  }

 private:
  PatternSpec parse_union(int depth) { return parse_chain(depth, '|', "union"); }
  PatternSpec parse_intersection(int depth) { return parse_chain(depth, '&', "intersection"); }

  // operand { op operand }: one node with every operand of the chain (a | b | c is flat).
  PatternSpec parse_chain(int depth, char op, const char* name) {
    PatternSpec first = op == '|' ? parse_intersection(depth) : parse_primary(depth);
    skip_space();
    if (!at(op)) return first;
    PatternSpec chain;
    chain.name = name;
    chain.operands.push_back(std::move(first));
    while (at(op)) {
      ++pos_;
      chain.operands.push_back(op == '|' ? parse_intersection(depth) : parse_primary(depth));
      skip_space();
    }
    return chain;
  }

  PatternSpec parse_primary(int depth) {
    skip_space();
    if (!at('(')) return parse_leaf();
    if (depth >= kMaxDepth) error("parentheses nested deeper than " + std::to_string(kMaxDepth));
    ++pos_;
    PatternSpec inner = parse_union(depth + 1);
    skip_space();
    if (!at(')')) error("expected ')'");
    ++pos_;
    return inner;
  }

  PatternSpec parse_leaf() {
    PatternSpec leaf;
    leaf.name = word("a pattern name");
    skip_space();
    if (at(':')) {
      ++pos_;
      for (;;) {
        parse_param(leaf);
        skip_space();
        if (!at(',')) break;
        ++pos_;
      }
    }
    check_leaf(leaf, text_);
    return leaf;
  }

  // key '=' value, added to leaf.params (a repeated key is an error pointing at its second use).
  void parse_param(PatternSpec& leaf) {
    skip_space();
    const size_t key_pos = pos_;
    std::string key = word("a key");
    skip_space();
    if (!at('=')) error("expected '=' after key '" + key + "'");
    ++pos_;
    skip_space();
    const size_t value_begin = pos_;
    while (pos_ < text_.size() && is_value_char(text_[pos_])) ++pos_;
    if (pos_ == value_begin) error("empty value for key '" + key + "'");
    std::string value = text_.substr(value_begin, pos_ - value_begin);
    if (!leaf.params.emplace(key, std::move(value)).second) {
      pos_ = key_pos;
      error("duplicate key '" + key + "' for " + leaf.name);
    }
  }

  std::string word(const char* expected) {
    skip_space();
    const size_t begin = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
    if (pos_ == begin) error(std::string("expected ") + expected);
    return text_.substr(begin, pos_ - begin);
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0)
      ++pos_;
  }
  [[noreturn]] void error(const std::string& message) const {
    if (pos_ >= text_.size()) fail("pattern spec '", text_, "': ", message, " at the end");
    fail("pattern spec '", text_, "': ", message, " at character ", pos_ + 1);
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

PatternSpec parse_pattern_spec(const std::string& text) { return SpecParser(text).parse(); }

std::string format_pattern_spec(const PatternSpec& spec) {
  if (!spec.is_composite()) {
    std::string out = spec.name;
    const char* separator = ":";
    for (const auto& [key, value] : spec.params) {
      out += separator + key + "=" + value;
      separator = ",";
    }
    return out;
  }
  const char* op = spec.name == "union" ? " | " : " & ";
  std::string out;
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    const PatternSpec& operand = spec.operands[k];
    const std::string text = format_pattern_spec(operand);
    if (k > 0) out += op;
    out += operand.is_composite() ? "(" + text + ")" : text;
  }
  return out;
}

std::string pattern_spec_syntax() {
  return "PATTERN-SPEC: name or name:key=value,key=value (e.g. sliding_window:w=128,causal=1).\n"
         "  Lists use '/': documents:lengths=100/200/300. Booleans: 0, 1, false, true.\n"
         "  Combine masks with '&' (intersection, binds tighter) and '|' (union), grouping with\n"
         "  parentheses: \"bigbird:block=16 & causal\", \"sliding_window:w=64 | random:p=0.01\".\n"
         "  Rectangular masks are bottom-right aligned: query i sits at key i + seqlen_k - "
         "seqlen_q.\n";
}

}  // namespace sparse_formats
