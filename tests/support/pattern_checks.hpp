// Shared by the mask generator tests (patterns_test.cpp, patterns_random_test.cpp): readable
// pictures of masks, a dense oracle built from a predicate, the CSR invariants checked
// independently of the library, error-message expectations and the shapes every pattern is
// checked on.
#pragma once

#include <sparse_formats/convert.hpp>
#include <sparse_formats/error.hpp>
#include <sparse_formats/patterns.hpp>
#include <sparse_formats/validate.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace spattn::testing::pattern_checks {

namespace sf = sparse_formats;

inline constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Rows of '1' (attends) and '.' (masked): readable in failure messages.
template <typename Index>
inline std::vector<std::string> picture(const sf::CsrPattern<Index>& p) {
  std::vector<std::string> rows(static_cast<size_t>(p.num_rows),
                                std::string(static_cast<size_t>(p.num_cols), '.'));
  for (int64_t i = 0; i < p.num_rows; ++i) {
    for (auto k = p.row_ptr[static_cast<size_t>(i)]; k < p.row_ptr[static_cast<size_t>(i) + 1];
         ++k) {
      rows[static_cast<size_t>(i)][static_cast<size_t>(p.col_idx[static_cast<size_t>(k)])] = '1';
    }
  }
  return rows;
}

using Predicate = std::function<bool(int64_t i, int64_t j, int64_t pos)>;

inline std::vector<std::string> oracle(int64_t nq, int64_t nk, const Predicate& attends) {
  std::vector<std::string> rows(static_cast<size_t>(nq), std::string(static_cast<size_t>(nk), '.'));
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t j = 0; j < nk; ++j) {
      if (attends(i, j, i + nk - nq)) rows[static_cast<size_t>(i)][static_cast<size_t>(j)] = '1';
    }
  }
  return rows;
}

// The CSR invariants of csr.hpp, checked independently of the library's validate().
template <typename Index>
inline ::testing::AssertionResult well_formed(const sf::CsrPattern<Index>& p) {
  if (p.row_ptr.size() != static_cast<size_t>(p.num_rows) + 1 || p.row_ptr[0] != 0) {
    return ::testing::AssertionFailure() << "row_ptr size/start";
  }
  for (int64_t i = 0; i < p.num_rows; ++i) {
    const auto begin = p.row_ptr[static_cast<size_t>(i)],
               end = p.row_ptr[static_cast<size_t>(i) + 1];
    if (end < begin) return ::testing::AssertionFailure() << "row_ptr decreases at " << i;
    for (auto k = begin; k < end; ++k) {
      const auto c = p.col_idx[static_cast<size_t>(k)];
      if (c < 0 || c >= p.num_cols)
        return ::testing::AssertionFailure() << "col out of range, row " << i;
      if (k > begin && c <= p.col_idx[static_cast<size_t>(k) - 1]) {
        return ::testing::AssertionFailure() << "cols not increasing, row " << i;
      }
    }
  }
  if (static_cast<size_t>(p.row_ptr.back()) != p.col_idx.size())
    return ::testing::AssertionFailure() << "nnz";
  return ::testing::AssertionSuccess();
}

template <typename Fn>
inline void expect_error(Fn&& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no FormatError, expected: " << expected;
  } catch (const sf::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << expected;
  }
}

inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

inline const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {0, 0},  {1, 1},  {7, 7},  {97, 97}, {257, 257}, {0, 5},   {5, 0},
    {7, 13}, {13, 7}, {1, 97}, {97, 1},  {96, 257},  {257, 96}};

// Compares a generator with its predicate over every shape, and asserts some shape is non-empty.
inline void check_against_oracle(const std::string& label,
                          const std::function<sf::CsrPattern<int32_t>(int64_t, int64_t)>& make,
                          const Predicate& attends) {
  int64_t non_empty = 0;
  for (const auto& [nq, nk] : kShapes) {
    SCOPED_TRACE(label + " " + std::to_string(nq) + " x " + std::to_string(nk));
    const auto p = make(nq, nk);
    ASSERT_TRUE(well_formed(p));
    ASSERT_NO_THROW(sf::validate(p, label));  // the library's own structural check agrees
    ASSERT_EQ(p.num_rows, nq);
    ASSERT_EQ(p.num_cols, nk);
    ASSERT_EQ(picture(p), oracle(nq, nk, attends));
    non_empty += p.nnz() > 0 ? 1 : 0;
  }
  EXPECT_GT(non_empty, 0) << label << " is always empty";
}


}  // namespace spattn::testing::pattern_checks
