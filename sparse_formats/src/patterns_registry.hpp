// The table of named patterns behind PATTERN-SPEC: each name's parameters with their types and
// defaults, and the typed reading of parameter values. Private to sparse_formats.
#pragma once

#include <sparse_formats/patterns.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sparse_formats::patterns_internal {

enum class ParamType { integer, uint64, boolean, real, int_list };

struct ParamDef {
  const char* key;
  ParamType type;
  const char* default_value;  // "" when absent by default (the meaning says what then)
  const char* meaning;
};

struct PatternDef {
  const char* name;
  const char* description;
  const char* reference;
  const char* example;
  std::vector<ParamDef> params;
};

// Sorted by name.
const std::vector<PatternDef>& pattern_registry();
// nullptr when the name is unknown.
const PatternDef* find_pattern(const std::string& name);
// "bigbird, causal, ..." and, for a pattern, "block, g, r, seed, w".
std::string valid_pattern_names();
std::string valid_keys(const PatternDef& pattern);
const char* type_name(ParamType type);

// Checks a leaf spec against the table: known name, known keys, every value of its key's type.
// `quoted` is the whole spec's text for messages.
void check_leaf(const PatternSpec& leaf, const std::string& quoted);

// Typed values. Each throws FormatError "pattern spec '<quoted>': <pattern>: <key> = '<text>' is
// not ..." on a bad value.
struct ValueContext {
  const std::string& quoted;
  const char* pattern;
  const char* key;
};
int64_t parse_int_value(const std::string& text, const ValueContext& where);
uint64_t parse_uint64_value(const std::string& text, const ValueContext& where);
bool parse_bool_value(const std::string& text, const ValueContext& where);
double parse_real_value(const std::string& text, const ValueContext& where);
std::vector<int64_t> parse_int_list_value(const std::string& text, const ValueContext& where);

}  // namespace sparse_formats::patterns_internal
