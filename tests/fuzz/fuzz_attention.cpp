// Fuzz target: the public attention API on small random problems, checked against the fp64
// reference (not only for crashes). The bytes choose batch, heads, grouped-query kv heads,
// seqlen_q, seqlen_k in [0, 20], head dims in [1, 8], one mask or one per head (each pair a bit),
// the algorithm, M (possibly too small: then InvalidArgument is the answer) and every value.
// Forward and backward must match the reference within the suite's fp32 rule
// (8 eps (head_dim + seqlen_k) max(1, |x|), times the group size for dK, dV).
#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace {

using spattn::TensorView;

struct Sizes {
  int64_t batch, heads, kv_heads, n_q, n_k, d, e;
};

std::vector<float> values(spattn_fuzz::Bytes& bytes, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (float& x : out) x = bytes.value();
  return out;
}

spattn::Mask mask_of(spattn_fuzz::Bytes& bytes, int64_t n_q, int64_t n_k) {
  sparse_formats::CsrPattern<int64_t> pattern(n_q, n_k, {0}, {});
  for (int64_t r = 0; r < n_q; ++r) {
    for (int64_t c = 0; c < n_k; ++c) {
      if (bytes.bit()) pattern.col_idx.push_back(c);
    }
    pattern.row_ptr.push_back(static_cast<int64_t>(pattern.col_idx.size()));
  }
  return spattn::Mask::from_csr(std::move(pattern), "fuzzed mask");
}

void compare(const char* name, const std::vector<float>& got, const std::vector<double>& want, double tolerance) {
  if (got.size() != want.size()) spattn_fuzz::finding(std::string(name) + ": size differs");
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isinf(w) && g == w) continue;  // the LSE of a row that attends nothing
    if (!(std::abs(g - w) <= tolerance * std::max(1.0, std::abs(w)))) {
      spattn_fuzz::finding(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(g) +
                           ", the reference gives " + std::to_string(w));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spattn_fuzz::Bytes bytes(data, size);
  Sizes s{};
  s.batch = bytes.integer(1, 2);
  s.kv_heads = bytes.integer(1, 2);
  s.heads = s.kv_heads * bytes.integer(1, 2);
  s.n_q = bytes.integer(0, 20);
  s.n_k = bytes.integer(0, 20);
  s.d = bytes.integer(1, 8);
  s.e = bytes.integer(1, 8);
  const spattn::Algorithm algorithms[] = {spattn::Algorithm::flash, spattn::Algorithm::small_cache,
                                          spattn::Algorithm::automatic, spattn::Algorithm::reference};
  spattn::AttentionOptions options;
  options.algorithm = algorithms[bytes.integer(0, 3)];
  options.cache_words = bytes.integer(0, 3000);  // 0: the default; small ones may fit nothing
  options.threads = static_cast<int>(bytes.integer(1, 2));
  std::vector<spattn::Mask> masks;
  const int64_t mask_count = s.heads > 1 && bytes.bit() ? s.heads : 1;
  for (int64_t h = 0; h < mask_count; ++h) masks.push_back(mask_of(bytes, s.n_q, s.n_k));
  const std::vector<float> q = values(bytes, s.batch * s.heads * s.n_q * s.d);
  const std::vector<float> k = values(bytes, s.batch * s.kv_heads * s.n_k * s.d);
  const std::vector<float> v = values(bytes, s.batch * s.kv_heads * s.n_k * s.e);
  const std::vector<float> d_o = values(bytes, s.batch * s.heads * s.n_q * s.e);

  auto in = [&](const std::vector<float>& x, int64_t h, int64_t n, int64_t last) {
    return TensorView<const float>::contiguous(x.data(), s.batch, h, n, last);
  };
  auto out = [&](std::vector<float>& x, int64_t h, int64_t n, int64_t last) {
    x.assign(static_cast<size_t>(s.batch * h * n * last), 0.0f);
    return TensorView<float>::contiguous(x.data(), s.batch, h, n, last);
  };
  std::vector<float> o, lse, dq, dk, dv;
  try {
    const auto qv = in(q, s.heads, s.n_q, s.d), kv = in(k, s.kv_heads, s.n_k, s.d), vv = in(v, s.kv_heads, s.n_k, s.e);
    const auto ov = out(o, s.heads, s.n_q, s.e), lsev = out(lse, s.heads, s.n_q, 1);
    if (masks.size() == 1) {  // the one-mask overload: shared by every head
      spattn::attention_forward(qv, kv, vv, ov, lsev, masks.front(), options);
    } else {  // one mask per query head
      spattn::attention_forward(qv, kv, vv, ov, lsev, masks, options);
    }
    const auto gradients = std::make_tuple(out(dq, s.heads, s.n_q, s.d), out(dk, s.kv_heads, s.n_k, s.d),
                                           out(dv, s.kv_heads, s.n_k, s.e));
    const auto ro = in(o, s.heads, s.n_q, s.e), rlse = in(lse, s.heads, s.n_q, 1), rdo = in(d_o, s.heads, s.n_q, s.e);
    if (masks.size() == 1) {
      spattn::attention_backward(qv, kv, vv, ro, rlse, rdo, std::get<0>(gradients), std::get<1>(gradients),
                                 std::get<2>(gradients), masks.front(), options);
    } else {
      spattn::attention_backward(qv, kv, vv, ro, rlse, rdo, std::get<0>(gradients), std::get<1>(gradients),
                                 std::get<2>(gradients), masks, options);
    }
  } catch (const spattn::InvalidArgument& error) {
    const std::string message = error.what();
    const bool too_small = message.find("needs M >=") != std::string::npos || message.find("fits neither") != std::string::npos;
    if (options.cache_words == 0 || !too_small) {
      spattn_fuzz::finding(std::string("refused a valid call: ") + error.what());
    }
    return 0;  // an M too small for the algorithm: refused by name
  }

  auto wide = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  const auto qd = wide(q), kd = wide(k), vd = wide(v), dod = wide(d_o);
  auto view = [&](const std::vector<double>& x, int64_t h, int64_t n, int64_t last) {
    return TensorView<const double>::contiguous(x.data(), s.batch, h, n, last);
  };
  spattn::reference::MaskList<int64_t> list;
  for (const spattn::Mask& mask : masks) list.push_back(mask.csr());
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  const auto forward = spattn::reference::forward<int64_t>(view(qd, s.heads, s.n_q, s.d), view(kd, s.kv_heads, s.n_k, s.d),
                                                           view(vd, s.kv_heads, s.n_k, s.e), list, scale);
  const auto backward = spattn::reference::backward<int64_t>(
      view(qd, s.heads, s.n_q, s.d), view(kd, s.kv_heads, s.n_k, s.d), view(vd, s.kv_heads, s.n_k, s.e),
      view(dod, s.heads, s.n_q, s.e), list, scale);
  const double tolerance = 8.0 * 0x1p-23 * static_cast<double>(std::max(s.d, s.e) + s.n_k + 1) * 16.0;
  compare("o", o, forward.o, tolerance);
  compare("lse", lse, forward.lse, tolerance);
  compare("dq", dq, backward.dq, tolerance);
  const double group = static_cast<double>(s.heads / s.kv_heads);
  compare("dk", dk, backward.dk, tolerance * group);
  compare("dv", dv, backward.dv, tolerance * group);
  return 0;
}
