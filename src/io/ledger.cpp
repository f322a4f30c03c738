#include <spattn/io.hpp>

#include <algorithm>
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

Traffic Ledger::total() const {
  Traffic sum;
  for (const auto& per_kind : traffic_) {
    for (const auto& traffic : per_kind) sum += traffic;
  }
  return sum;
}

Traffic Ledger::total(WordKind kind) const {
  Traffic sum;
  for (const auto& per_kind : traffic_) sum += per_kind[static_cast<int>(kind)];
  return sum;
}

Ledger& Ledger::operator+=(const Ledger& other) {
  for (int op = 0; op < kNumOperands; ++op) {
    for (int kind = 0; kind < 2; ++kind) traffic_[op][kind] += other.traffic_[op][kind];
  }
  peak_resident_ = std::max(peak_resident_, other.peak_resident_);
  return *this;
}

std::string Ledger::report() const {
  std::ostringstream out;
  char line[160];
  std::snprintf(line, sizeof line, "%-8s %-6s %16s %16s\n", "operand", "kind", "reads", "writes");
  out << line;
  for (int op = 0; op < kNumOperands; ++op) {
    for (int kind = 0; kind < 2; ++kind) {
      const Traffic& t = traffic_[op][kind];
      if (t.total() == 0) continue;
      std::snprintf(line, sizeof line, "%-8s %-6s %16lld %16lld\n",
                    operand_name(static_cast<Operand>(op)), kind == 0 ? "value" : "index",
                    static_cast<long long>(t.reads), static_cast<long long>(t.writes));
      out << line;
    }
  }
  const Traffic sum = total();
  std::snprintf(line, sizeof line, "%-8s %-6s %16lld %16lld\n", "total", "", static_cast<long long>(sum.reads),
                static_cast<long long>(sum.writes));
  out << line;
  out << "I/O (reads + writes): " << sum.total() << " words; peak resident: " << peak_resident_
      << " words\n";
  return out.str();
}

}  // namespace spattn::io
