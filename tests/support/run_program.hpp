// Runs a built program as a user does, for the tests that check a program's output and exit code
// (cli_test.cpp's spattn, bench_window_target_test.cpp's spattn_bench).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace spattn_test {

struct ProgramResult {
  int exit_code = -1;  // -1: could not start, or did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `command_line` through the shell, with stderr merged into stdout.
inline ProgramResult run_program(const std::string& command_line) {
  ProgramResult result;
  FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace spattn_test
