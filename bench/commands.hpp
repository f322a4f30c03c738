// The subcommands of the spattn program. Each registers itself on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

namespace spattn::cli {

void register_patterns(CLI::App& app);
void register_attention(CLI::App& app);
void register_run(CLI::App& app);
void register_sweep(CLI::App& app);
void register_plan(CLI::App& app);  // plan and bound

}  // namespace spattn::cli
