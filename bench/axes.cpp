#include "axes.hpp"

#include "cli_support.hpp"

#include <limits>

namespace spattn::cli {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

int64_t parse_integer(const std::string& text, const std::string& flag, const std::string& item) {
  const std::string where = item == text ? "'" + text + "'" : "'" + text + "' in '" + item + "'";
  if (text.empty()) throw UsageError(flag + ": empty value in '" + item + "'");
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::out_of_range&) {
    throw UsageError(flag + ": " + where + " is out of range");
  } catch (const std::exception&) {
    throw UsageError(flag + ": " + where + " is not an integer");
  }
  if (used != text.size()) throw UsageError(flag + ": " + where + " is not an integer");
  return value;
}

void append(std::vector<int64_t>& values, int64_t value, const std::string& flag, const std::string& item) {
  if (static_cast<int64_t>(values.size()) >= kMaxAxisValues) {
    throw UsageError(flag + ": '" + item + "' gives more than " + std::to_string(kMaxAxisValues) + " values");
  }
  values.push_back(value);
}

void check_minimum(int64_t value, int64_t minimum, const std::string& flag) {
  if (value < minimum) {
    throw UsageError(flag + ": values must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  }
}

void append_range(std::vector<int64_t>& values, const std::vector<std::string>& parts, const std::string& flag,
                  const std::string& item, int64_t minimum) {
  const int64_t start = parse_integer(trim(parts[0]), flag, item);
  const int64_t end = parse_integer(trim(parts[1]), flag, item);
  check_minimum(start, minimum, flag);
  if (start > end) {
    throw UsageError(flag + ": range '" + item + "' is empty: start " + std::to_string(start) + " > end " +
                     std::to_string(end));
  }
  bool multiply = false;
  int64_t step = 1;
  if (parts.size() == 3) {
    const std::string text = trim(parts[2]);
    if (text.empty() || (text[0] != 'x' && text[0] != '*' && text[0] != '+')) {
      throw UsageError(flag + ": range '" + item + "': the step '" + text +
                       "' must be xF (multiply by F) or +S (add S), e.g. 64:65536:x2 or 32:128:+32");
    }
    multiply = text[0] != '+';
    step = parse_integer(text.substr(1), flag, item);
    if (multiply && step < 2) {
      throw UsageError(flag + ": range '" + item + "': the factor must be >= 2, got " + std::to_string(step));
    }
    if (!multiply && step < 1) {
      throw UsageError(flag + ": range '" + item + "': the step must be >= 1, got " + std::to_string(step));
    }
    if (multiply && start < 1) {
      throw UsageError(flag + ": range '" + item + "': a multiplicative range must start at >= 1, got " +
                       std::to_string(start));
    }
  }
  for (int64_t value = start;;) {
    append(values, value, flag, item);
    if (multiply) {
      if (value > end / step) break;
      value *= step;
    } else {
      if (end - value < step) break;  // no overflow: minimum <= value <= end
      value += step;
    }
    if (value > end) break;
  }
}

}  // namespace

std::vector<int64_t> parse_int_axis(const std::string& text, const std::string& flag, int64_t minimum) {
  if (trim(text).empty()) throw UsageError(flag + ": no values given");
  std::vector<int64_t> values;
  for (const std::string& raw : split(text, ',')) {
    const std::string item = trim(raw);
    const auto parts = split(item, ':');
    if (parts.size() == 1) {
      append(values, parse_integer(item, flag, item), flag, item);
    } else if (parts.size() == 2 || parts.size() == 3) {
      append_range(values, parts, flag, item, minimum);
    } else {
      throw UsageError(flag + ": '" + item + "' is not a number or a range A:B:xF / A:B:+S");
    }
  }
  for (int64_t value : values) check_minimum(value, minimum, flag);
  return values;
}

std::vector<std::string> parse_name_axis(const std::string& text, const std::string& flag,
                                         const std::vector<std::string>& allowed) {
  if (trim(text).empty()) throw UsageError(flag + ": no values given");
  std::vector<std::string> names;
  for (const std::string& raw : split(text, ',')) {
    const std::string name = trim(raw);
    bool known = false;
    for (const std::string& candidate : allowed) known = known || candidate == name;
    if (!known) {
      std::string list;
      for (size_t i = 0; i < allowed.size(); ++i) list += (i ? ", " : "") + allowed[i];
      throw UsageError(flag + ": '" + name + "' is not one of " + list);
    }
    names.push_back(name);
  }
  return names;
}

}  // namespace spattn::cli
