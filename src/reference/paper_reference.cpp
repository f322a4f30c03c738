// The paper's formulation (Alman and Song; theory.md section 2), written literally with dense
// n x n matrices so that it is an independent check of the general reference.
//
//   A    = scale * A1 X A2^T                      (n x n; only the mask's entries are used)
//   f(X) = D(X)^{-1} exp(A),  D(X) = diag(exp(A) 1)   (exp is 0 off the mask; the row max is
//                                                      subtracted first, which D^{-1} cancels)
//   h(Y) = A3 Y                                   (n x d)
//   c(X) = f(X) h(Y) - E                          (n x d)
//   L(X) = 1/2 ||c(X)||_F^2
//
// Gradient. dL = <c, d(f) h>. Row i of f is the softmax of row i of A, whose Jacobian is
// diag(f_i) - f_i f_i^T, so with q = c h^T (n x n):
//   dL/dA_i = (diag(f_i) - f_i f_i^T) q_i = f_i ∘ q_i - (f_i . q_i) f_i,
// i.e. p = f ∘ q - diag(rowsum(f ∘ q)) f. Since A = scale * A1 X A2^T,
//   dL/dX = scale * A1^T p A2.
// In attention names: Q = A1 X, K = A2, V = A3 Y, O = f h, dO = c = O - E, q = dO V^T = dP,
// rowsum(f ∘ q) = rowsum(P ∘ dP) = rowsum(dO ∘ O) = D, so p = P ∘ (dP - D) = dS and
// dL/dX = A1^T (scale dS K) = A1^T dQ. The tests check both routes agree.
#include <spattn/reference.hpp>

#include "reference/reference_validation.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace spattn::reference {
namespace {

// Row-major dense matrix, just enough for the formulas above.
struct Dense {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> values;

  Dense(int64_t r, int64_t c) : rows(r), cols(c), values(static_cast<std::size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return values[static_cast<std::size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return values[static_cast<std::size_t>(i * cols + j)]; }
};

Dense from_array(const double* data, int64_t rows, int64_t cols) {
  Dense m(rows, cols);
  std::copy(data, data + rows * cols, m.values.begin());
  return m;
}

// a b^T when b_transposed, else a b.
Dense multiply(const Dense& a, const Dense& b, bool b_transposed) {
  const int64_t inner = a.cols;
  Dense out(a.rows, b_transposed ? b.rows : b.cols);
  for (int64_t i = 0; i < out.rows; ++i) {
    for (int64_t j = 0; j < out.cols; ++j) {
      double sum = 0.0;
      for (int64_t t = 0; t < inner; ++t) sum += a(i, t) * (b_transposed ? b(j, t) : b(t, j));
      out(i, j) = sum;
    }
  }
  return out;
}

Dense transpose(const Dense& a) {
  Dense out(a.cols, a.rows);
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t j = 0; j < a.cols; ++j) out(j, i) = a(i, j);
  }
  return out;
}

template <typename Index>
void check_problem(const char* where, const PaperProblem<Index>& problem) {
  if (problem.n < 0 || problem.d < 0) fail(where, ": n = ", problem.n, ", d = ", problem.d, " (must be >= 0)");
  const int64_t largest = std::max(problem.n, problem.d);  // n * n, n * d, d * d must fit
  if (largest > 0 && largest > std::numeric_limits<int64_t>::max() / largest) {
    fail(where, ": n = ", problem.n, ", d = ", problem.d, " overflow int64 sizes");
  }
  const int64_t nd = problem.n * problem.d;
  const int64_t dd = problem.d * problem.d;
  const std::pair<const char*, const double*> inputs[] = {
      {"a1", problem.a1}, {"a2", problem.a2}, {"a3", problem.a3}, {"e", problem.e}};
  for (const auto& [name, data] : inputs) {
    if (nd > 0 && data == nullptr) fail(where, ": ", name, " is null but n * d = ", nd);
  }
  if (dd > 0 && problem.x == nullptr) fail(where, ": x is null but d * d = ", dd);
  if (dd > 0 && problem.y == nullptr) fail(where, ": y is null but d * d = ", dd);
  detail::check_scale(where, problem.scale);
  if (problem.mask != nullptr) detail::check_mask(where, "mask", *problem.mask, problem.n, problem.n, "n x n");
}

// 1 where (i, j) attends (every pair when the mask is absent).
template <typename Index>
std::vector<bool> dense_mask(const PaperProblem<Index>& problem) {
  const int64_t n = problem.n;
  if (problem.mask == nullptr) return std::vector<bool>(static_cast<std::size_t>(n * n), true);
  std::vector<bool> attends(static_cast<std::size_t>(n * n), false);
  const auto& mask = *problem.mask;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = mask.row_begin(i); t < mask.row_end(i); ++t) {
      attends[static_cast<std::size_t>(i * n + static_cast<int64_t>(mask.col_idx[t]))] = true;
    }
  }
  return attends;
}

// f(X) = D(X)^{-1} exp(scale * A1 X A2^T) on the mask; a zero row where the mask row is empty.
template <typename Index>
Dense softmax_matrix(const PaperProblem<Index>& problem) {
  const int64_t n = problem.n;
  const int64_t d = problem.d;
  const Dense a1 = from_array(problem.a1, n, d);
  const Dense a2 = from_array(problem.a2, n, d);
  const Dense x = from_array(problem.x, d, d);
  const Dense a = multiply(multiply(a1, x, false), a2, true);  // A1 X A2^T (scale applied below)
  const std::vector<bool> attends = dense_mask(problem);

  Dense f(n, n);
  for (int64_t i = 0; i < n; ++i) {
    double row_max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      if (attends[static_cast<std::size_t>(i * n + j)]) row_max = std::max(row_max, problem.scale * a(i, j));
    }
    if (row_max == -std::numeric_limits<double>::infinity()) continue;  // empty row: f_i = 0
    double row_sum = 0.0;  // D(X)_ii, up to the factor exp(row_max) that D^{-1} cancels
    for (int64_t j = 0; j < n; ++j) {
      if (attends[static_cast<std::size_t>(i * n + j)]) {
        f(i, j) = std::exp(problem.scale * a(i, j) - row_max);
        row_sum += f(i, j);
      }
    }
    for (int64_t j = 0; j < n; ++j) f(i, j) /= row_sum;
  }
  return f;
}

// c(X) = f(X) h(Y) - E, and h(Y) = A3 Y.
template <typename Index>
std::pair<Dense, Dense> residual(const PaperProblem<Index>& problem, const Dense& f) {
  const int64_t n = problem.n;
  const int64_t d = problem.d;
  Dense h = multiply(from_array(problem.a3, n, d), from_array(problem.y, d, d), false);
  Dense c = multiply(f, h, false);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) c(i, j) -= problem.e[i * d + j];
  }
  return {std::move(c), std::move(h)};
}

}  // namespace

template <typename Index>
double paper_loss(const PaperProblem<Index>& problem) {
  check_problem("reference::paper_loss", problem);
  const Dense f = softmax_matrix(problem);
  const Dense c = residual(problem, f).first;
  double loss = 0.0;
  for (const double value : c.values) loss += 0.5 * value * value;  // 1/2 ||c||_F^2
  return loss;
}

template <typename Index>
std::vector<double> paper_gradient(const PaperProblem<Index>& problem) {
  check_problem("reference::paper_gradient", problem);
  const int64_t n = problem.n;
  const int64_t d = problem.d;
  const Dense f = softmax_matrix(problem);
  const auto [c, h] = residual(problem, f);
  const Dense q = multiply(c, h, true);  // q = c h^T  (n x n)

  Dense p(n, n);  // p = f ∘ q - diag(rowsum(f ∘ q)) f
  for (int64_t i = 0; i < n; ++i) {
    double row_dot = 0.0;
    for (int64_t j = 0; j < n; ++j) row_dot += f(i, j) * q(i, j);
    for (int64_t j = 0; j < n; ++j) p(i, j) = f(i, j) * q(i, j) - row_dot * f(i, j);
  }
  // g = scale * A1^T p A2  (d x d)
  Dense g = multiply(multiply(transpose(from_array(problem.a1, n, d)), p, false),
                     from_array(problem.a2, n, d), false);
  for (double& value : g.values) value *= problem.scale;
  return std::move(g.values);
}

template double paper_loss<int32_t>(const PaperProblem<int32_t>&);
template double paper_loss<int64_t>(const PaperProblem<int64_t>&);
template std::vector<double> paper_gradient<int32_t>(const PaperProblem<int32_t>&);
template std::vector<double> paper_gradient<int64_t>(const PaperProblem<int64_t>&);

}  // namespace spattn::reference
