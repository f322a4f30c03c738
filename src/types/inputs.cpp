// The sparse inputs' own methods (spattn/inputs.hpp).
#include <spattn/inputs.hpp>

#include <algorithm>

namespace spattn {

AttentionInput AttentionInput::dense(TensorView<const float> matrix) {
  AttentionInput input;
  input.dense_ = matrix;
  return input;
}

AttentionInput AttentionInput::csr(const CsrInput& matrix) {
  AttentionInput input;
  input.is_csr_ = true;
  input.csr_ = matrix;
  return input;
}

int64_t AttentionInput::seqlen() const { return is_csr_ ? csr_.num_rows() : dense_.seqlen(); }
int64_t AttentionInput::head_dim() const { return is_csr_ ? csr_.num_cols() : dense_.head_dim(); }
int64_t AttentionInput::nnz() const { return is_csr_ ? csr_.nnz() : seqlen() * head_dim(); }

double AttentionInputs::z_input() const {
  return 0.5 * (static_cast<double>(q.nnz()) + static_cast<double>(k.nnz()));
}

MultiHeadInputs::MultiHeadInputs(const AttentionInputs& one) : q{one.q}, k{one.k}, v{one.v} {}

AttentionInputs MultiHeadInputs::head(int64_t b, int64_t h) const {
  const int64_t g = h / std::max<int64_t>(heads / std::max<int64_t>(kv_heads, 1), 1);
  return {q[static_cast<size_t>(b * heads + h)], k[static_cast<size_t>(b * kv_heads + g)],
          v[static_cast<size_t>(b * kv_heads + g)]};
}

}  // namespace spattn
