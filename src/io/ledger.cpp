#include <spattn/io.hpp>

#include <spattn/error.hpp>

#include <algorithm>
#include <numeric>
#include <cstdio>
#include <sstream>

namespace spattn::io {

const char* operand_name(Operand operand) {
  switch (operand) {
    case Operand::q: return "Q";
    case Operand::k: return "K";
    case Operand::v: return "V";
    case Operand::o: return "O";
    case Operand::lse: return "LSE";
    case Operand::d_o: return "dO";
    case Operand::delta: return "D";
    case Operand::dq: return "dQ";
    case Operand::dk: return "dK";
    case Operand::dv: return "dV";
    case Operand::s: return "S";
    case Operand::p: return "P";
    case Operand::dp: return "dP";
    case Operand::ds: return "dS";
    case Operand::row_max: return "row_max";
    case Operand::row_sum: return "row_sum";
    case Operand::a1: return "A1";
    case Operand::a2: return "A2";
    case Operand::a3: return "A3";
    case Operand::e: return "E";
    case Operand::x: return "X";
    case Operand::y: return "Y";
    case Operand::g: return "g";
    case Operand::mask: return "mask";
    case Operand::other: return "other";
  }
  return "?";
}

void check_line_words(const char* where, int64_t line_words) {
  if (line_words < 1) fail(where, ": line_words = ", line_words, " must be at least 1");
}

int64_t plan_line_words(const char* where, int64_t requested, const Ledger* ledger, int64_t otherwise) {
  if (requested < 0) fail(where, ": line_words = ", requested, " must be >= 0 (0: the ledger's, else ", otherwise, ")");
  const int64_t line_words = requested > 0 ? requested : (ledger != nullptr ? ledger->line_words() : otherwise);
  const char* which = requested > 0 ? "line_words" : "the ledger's line_words";
  if (!is_plan_line_words(line_words)) {
    fail(where, ": ", which, " = ", line_words, " must be a power of two from 1 to ", kMaxLineWords);
  }
  if (ledger != nullptr && ledger->line_words() != line_words) {
    fail(where, ": line_words = ", line_words, " but the ledger counts lines of ", ledger->line_words(),
         " words; give both the same size (or line_words = 0 to take the ledger's)");
  }
  return line_words;
}

int64_t chunked_lines(int64_t total, int64_t chunk, int64_t line_words) {
  if (total <= 0) return 0;
  const int64_t chunks = (total + chunk - 1) / chunk;
  // Boundary j * chunk (j = 1 .. chunks - 1) falls on a line boundary exactly when j is a
  // multiple of line_words / gcd(chunk, line_words); every other one splits a line in two.
  const int64_t aligned_every = line_words / std::gcd(chunk, line_words);
  return (total + line_words - 1) / line_words + (chunks - 1) - (chunks - 1) / aligned_every;
}

int64_t grid_lines(int64_t row_stride, int64_t col_stride, int64_t view_rows, int64_t view_cols,
                   int64_t tile_rows, int64_t tile_cols, int64_t line_words) {
  if (view_rows <= 0 || view_cols <= 0) return 0;
  const bool column_vector = view_cols == 1 && row_stride == 1;
  if (col_stride == 1 && !column_vector) return view_rows * chunked_lines(view_cols, tile_cols, line_words);
  if (row_stride == 1) return view_cols * chunked_lines(view_rows, tile_rows, line_words);
  return view_rows * view_cols;
}

Ledger::Ledger(int64_t line_words) : line_words_(line_words) {
  check_line_words("Ledger", line_words);
}

namespace {

using TrafficTable = std::array<std::array<Traffic, 2>, kNumOperands>;

// Every operand's traffic of one kind, or of both kinds (kind < 0).
Traffic sum_of(const TrafficTable& table, int kind) {
  Traffic sum;
  for (const auto& per_kind : table) {
    for (int k = 0; k < 2; ++k) {
      if (kind < 0 || k == kind) sum += per_kind[k];
    }
  }
  return sum;
}

}  // namespace

Traffic Ledger::total() const { return sum_of(traffic_, -1); }
Traffic Ledger::total(WordKind kind) const { return sum_of(traffic_, static_cast<int>(kind)); }
Traffic Ledger::total_lines() const { return sum_of(lines_, -1); }
Traffic Ledger::total_lines(WordKind kind) const { return sum_of(lines_, static_cast<int>(kind)); }

Ledger& Ledger::operator+=(const Ledger& other) {
  if (other.line_words_ != line_words_) {
    fail("Ledger: cannot add a ledger of ", other.line_words_, "-word lines to one of ", line_words_,
         "-word lines");
  }
  for (int op = 0; op < kNumOperands; ++op) {
    for (int kind = 0; kind < 2; ++kind) {
      traffic_[op][kind] += other.traffic_[op][kind];
      lines_[op][kind] += other.lines_[op][kind];
    }
  }
  peak_resident_ = std::max(peak_resident_, other.peak_resident_);
  return *this;
}

std::string Ledger::report() const {
  std::ostringstream out;
  char line[200];
  std::snprintf(line, sizeof line, "%-8s %-6s %16s %16s %14s %14s\n", "operand", "kind", "reads",
                "writes", "read lines", "write lines");
  out << line;
  const auto row = [&](const char* name, const char* kind, const Traffic& words, const Traffic& lines) {
    std::snprintf(line, sizeof line, "%-8s %-6s %16lld %16lld %14lld %14lld\n", name, kind,
                  static_cast<long long>(words.reads), static_cast<long long>(words.writes),
                  static_cast<long long>(lines.reads), static_cast<long long>(lines.writes));
    out << line;
  };
  for (int op = 0; op < kNumOperands; ++op) {
    for (int kind = 0; kind < 2; ++kind) {
      if (traffic_[op][kind].total() == 0 && lines_[op][kind].total() == 0) continue;
      row(operand_name(static_cast<Operand>(op)), kind == 0 ? "value" : "index", traffic_[op][kind],
          lines_[op][kind]);
    }
  }
  const Traffic sum = total();
  const Traffic sum_lines = total_lines();
  row("total", "", sum, sum_lines);
  out << "I/O (reads + writes): " << sum.total() << " words, " << sum_lines.total() << " lines of "
      << line_words_ << " words; peak resident: " << peak_resident_ << " words\n";
  return out.str();
}

}  // namespace spattn::io
