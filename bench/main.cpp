#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"spattn: exact sparse attention that counts the data it moves"};
  app.set_version_flag("--version", SPATTN_VERSION_STRING);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
