// Shared by the Matrix Market tests (io_matrix_market_test.cpp: parsing and malformed input;
// io_matrix_market_write_test.cpp: writing and round trips): parsing from a string, error-message
// expectations, random patterns and a temporary directory.
#pragma once

#include <sparse_formats/error.hpp>
#include <sparse_formats/matrix_market.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>

namespace spattn::testing::matrix_market_checks {

namespace sf = sparse_formats;
namespace fs = std::filesystem;

inline sf::MatrixMarketData parse(const std::string& text,
                           sf::DuplicatePolicy duplicates = sf::DuplicatePolicy::sum) {
  std::istringstream in(text);
  return sf::read_matrix_market(in, "test.mtx", duplicates);
}

// Parses `text` expecting a FormatError whose message contains every one of `parts`.
inline void expect_parse_error(const std::string& text, std::initializer_list<const char*> parts,
                        sf::DuplicatePolicy duplicates = sf::DuplicatePolicy::sum) {
  try {
    parse(text, duplicates);
    ADD_FAILURE() << "no FormatError for:\n" << text;
  } catch (const sf::FormatError& error) {
    const std::string message = error.what();
    for (const char* part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

template <typename F>
inline std::string error_message(F&& f) {
  try {
    f();
  } catch (const sf::FormatError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no FormatError";
  return "";
}

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// A random CSR pattern with about `density` of the entries present.
template <typename Index>
sf::CsrPattern<Index> random_pattern(int64_t rows, int64_t cols, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution present(density);
  sf::CsrPattern<Index> pattern = sf::CsrPattern<Index>::empty(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (present(rng)) pattern.col_idx.push_back(static_cast<Index>(c));
    }
    pattern.row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<Index>(pattern.col_idx.size());
  }
  return pattern;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto tag = std::chrono::steady_clock::now().time_since_epoch().count();
    dir_ = fs::temp_directory_path() / ("spattn_io_mtx_" + std::to_string(tag));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  int64_t files_in_dir() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  }
  fs::path dir_;
};


}  // namespace spattn::testing::matrix_market_checks
