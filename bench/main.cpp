// spattn: the command line. Exit codes: 0 success, 1 runtime error (bad file, infeasible run),
// 2 usage error (bad flag, unknown pattern). Errors are one line on stderr.
#include "cli_support.hpp"
#include "commands.hpp"

#include <spattn/version.hpp>

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <new>

int main(int argc, char** argv) {
  CLI::App app{"spattn: exact sparse attention that counts the data it moves"};
  app.set_version_flag("--version", std::string("spattn ") + spattn::version() +
                                        (spattn::built_with_cuda() ? " (CUDA)" : " (CPU only)"));
  app.require_subcommand(1);
  spattn::cli::register_patterns(app);
  spattn::cli::register_attention(app);
  spattn::cli::register_plan(app);
  spattn::cli::register_run(app);
  spattn::cli::register_sweep(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "spattn: " << e.what() << "\n(run 'spattn --help' for usage)\n";
    return 2;
  } catch (const spattn::cli::UsageError& e) {
    std::cerr << "spattn: " << e.what() << '\n';
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "spattn: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "spattn: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
