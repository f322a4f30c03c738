// The plan and ledger as JSON (report.hpp).
#include "report.hpp"

#include <nlohmann/json.hpp>

namespace spattn::torch_ext {

namespace {

nlohmann::json cost_json(const AlgorithmCost& cost) {
  return {{"feasible", cost.feasible}, {"min_cache_words", cost.min_cache_words}, {"reads", cost.reads},
          {"writes", cost.writes},     {"index_words", cost.index_words},         {"flops", cost.flops},
          {"time_price", cost.time_price}, {"tiles", cost.tiles},
          // Lines of 16 words where the plan predicts them (the dense schedules), else null.
          {"lines", cost.lines_predicted ? nlohmann::json(cost.total_lines()) : nlohmann::json(nullptr)}};
}

}  // namespace

std::string report_json(const Plan& plan, const io::Ledger* ledger) {
  nlohmann::json out = {
      {"pass", pass_name(plan.pass)},
      {"algorithm", algorithm_name(plan.algorithm)},
      {"requested", algorithm_name(plan.requested)},
      {"objective", plan_objective_name(plan.objective)},
      {"cache_words", plan.cache_words},
      {"num_heads", plan.num_heads},
      {"predicted_reads", plan.reads},
      {"predicted_writes", plan.writes},
      {"line_words", plan.line_words},
      {"predicted_read_lines", plan.lines_predicted ? nlohmann::json(plan.read_lines) : nlohmann::json(nullptr)},
      {"predicted_write_lines", plan.lines_predicted ? nlohmann::json(plan.write_lines) : nlohmann::json(nullptr)},
      {"kv_sum_reads", plan.kv_sum_reads},
      {"kv_sum_writes", plan.kv_sum_writes},
      {"bound", plan.bound.value},
      {"compulsory", plan.compulsory},
      {"ratio_to_bound", plan.ratio_to_bound},
      {"ratio_to_flash", plan.ratio_to_flash},
      {"z_qk", plan.z_qk},
      {"flash", cost_json(plan.flash)},
      {"small_cache", cost_json(plan.small_cache)},
      {"text", plan.to_string()},
  };
  if (ledger != nullptr) {
    out["counted_reads"] = ledger->reads();
    out["counted_writes"] = ledger->writes();
    out["counted_read_lines"] = ledger->total_lines().reads;
    out["counted_write_lines"] = ledger->total_lines().writes;
    out["peak_resident"] = ledger->peak_resident();
    nlohmann::json operands = nlohmann::json::object();
    for (int i = 0; i < io::kNumOperands; ++i) {
      const auto operand = static_cast<io::Operand>(i);
      const io::Traffic values = ledger->traffic(operand, io::WordKind::value);
      const io::Traffic indices = ledger->traffic(operand, io::WordKind::index);
      if (values.reads + values.writes + indices.reads + indices.writes == 0) continue;
      const io::Traffic lines = ledger->lines(operand, io::WordKind::value);
      const io::Traffic index_lines = ledger->lines(operand, io::WordKind::index);
      operands[io::operand_name(operand)] = {{"reads", values.reads + indices.reads},
                                              {"writes", values.writes + indices.writes},
                                              {"index_words", indices.reads + indices.writes},
                                              {"read_lines", lines.reads + index_lines.reads},
                                              {"write_lines", lines.writes + index_lines.writes}};
    }
    out["operands"] = operands;
  }
  return out.dump();
}

}  // namespace spattn::torch_ext
