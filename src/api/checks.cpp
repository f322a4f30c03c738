// The argument checks of the attention entry points (checks.hpp).
#include "api/checks.hpp"

#include "cpu/workers.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

namespace spattn::api_detail {

std::vector<Mask> check_masks(const char* where, const HeadMasks& given, int64_t heads, int64_t seqlen_q,
                              int64_t seqlen_k) {
  std::vector<Mask> masks = given.resolve(where, heads, seqlen_q, seqlen_k);
  for (size_t h = 0; h < masks.size(); ++h) {
    const Mask& mask = masks[h];
    if (mask.seqlen_q() != seqlen_q || mask.seqlen_k() != seqlen_k) {
      const std::string name = given.per_head() ? "masks[" + std::to_string(h) + "]" : std::string("mask");
      fail(where, ": ", name, " is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", but q has seqlen ", seqlen_q,
           " and k has seqlen ", seqlen_k);
    }
  }
  return masks;
}

bounds::DenseShape check_shape(const char* where, const AttentionShape& shape) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", shape.batch},       {"heads", shape.heads},       {"kv_heads", shape.kv_heads},
      {"seqlen_q", shape.seqlen_q}, {"seqlen_k", shape.seqlen_k}, {"head_dim", shape.head_dim},
      {"head_dim_v", shape.head_dim_v}};
  for (const auto& [name, size] : sizes) {
    if (size < 0) fail(where, ": ", name, " = ", size, " must be >= 0");
  }
  if (shape.kv_heads == 0 ? shape.heads != 0 : shape.heads % shape.kv_heads != 0) {
    fail(where, ": q has ", shape.heads, " heads, not a multiple of k's ", shape.kv_heads, " heads");
  }
  return {shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v > 0 ? shape.head_dim_v : shape.head_dim};
}

namespace {

bool empty(const NamedView& v) {
  for (const int64_t extent : v.shape) {
    if (extent == 0) return true;
  }
  return v.data == nullptr;
}

// The bytes [first, last] the view spans.
std::pair<intptr_t, intptr_t> byte_span(const NamedView& v) {
  intptr_t low = reinterpret_cast<intptr_t>(v.data), high = low;
  for (size_t i = 0; i < 4; ++i) {
    const intptr_t reach = static_cast<intptr_t>((v.shape[i] - 1) * v.stride[i] * v.element_bytes);
    (reach < 0 ? low : high) += reach;
  }
  return {low, high + static_cast<intptr_t>(v.element_bytes) - 1};
}

bool self_overlapping(const NamedView& v) {
  std::array<std::pair<int64_t, int64_t>, 4> dims{};  // (|stride|, extent) of dimensions with extent > 1
  size_t count = 0;
  for (size_t i = 0; i < 4; ++i) {
    if (v.shape[i] > 1) dims[count++] = {v.stride[i] < 0 ? -v.stride[i] : v.stride[i], v.shape[i]};
  }
  std::sort(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(count));
  int64_t covered = 0;  // the span, in elements, of the dimensions with smaller strides
  for (size_t i = 0; i < count; ++i) {
    if (dims[i].first <= covered) return true;
    covered += (dims[i].second - 1) * dims[i].first;
  }
  return false;
}

}  // namespace

void check_outputs_apart(const char* where, const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedView& out = outputs[i];
    if (empty(out)) continue;
    if (self_overlapping(out)) {
      fail(where, ": ", out.name, "'s strides (", out.stride[0], ", ", out.stride[1], ", ", out.stride[2], ", ",
           out.stride[3], ") map two of its elements to one address; an output must not overlap itself");
    }
    const std::pair<intptr_t, intptr_t> span = byte_span(out);
    auto apart = [&](const NamedView& other) {
      if (empty(other)) return;
      const std::pair<intptr_t, intptr_t> other_span = byte_span(other);
      if (span.first <= other_span.second && other_span.first <= span.second) {
        fail(where, ": ", out.name, " shares memory with ", other.name, "; outputs must not overlap each other or an input");
      }
    };
    for (size_t j = i + 1; j < outputs.size(); ++j) apart(outputs[j]);
    for (const NamedView& input : inputs) apart(input);
  }
}

double resolve_scale(const char* where, const AttentionOptions& options, int64_t head_dim) {
  const double scale = options.scale.value_or(
      head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  if (!std::isfinite(scale)) fail(where, ": scale = ", scale, " must be finite");
  return scale;
}

int64_t resolve_cache(const char* where, const AttentionOptions& options) {
  if (options.cache_words < 0) fail(where, ": cache_words = ", options.cache_words, " must be >= 0");
  return options.cache_words == 0 ? default_cache_words() : options.cache_words;
}

int64_t resolve_line_words(const char* where, const AttentionOptions& options, ElementType element) {
  return io::plan_line_words(where, options.line_words, options.ledger, io::line_words_of(element));
}

namespace {
// Below this many elements one thread scans them all (waking a thread costs about what scanning a
// megabyte does), and each worker gets at least half of it.
constexpr int64_t kParallelFiniteElements = int64_t{1} << 18;
}  // namespace

void check_finite_tensors(const std::vector<FiniteScan>& scans, int threads) {
  int64_t elements = 0;
  for (const FiniteScan& scan : scans) elements += scan.elements;
  const int workers = static_cast<int>(
      std::clamp<int64_t>(elements / (kParallelFiniteElements / 2), 1, std::max(threads, 1)));
  // refused[t * workers + w]: whether worker w found a refused row in its share of tensor t.
  std::vector<char> refused(scans.size() * static_cast<size_t>(workers), 0);
  cpu::run_workers(workers, [&](int worker) {
    for (size_t t = 0; t < scans.size(); ++t) {
      const int64_t rows = scans[t].rows;
      const int64_t begin = rows * worker / workers, end = rows * (worker + 1) / workers;
      if (scans[t].first_refused(begin, end) != end) refused[t * static_cast<size_t>(workers) + static_cast<size_t>(worker)] = 1;
    }
  });
  for (size_t t = 0; t < scans.size(); ++t) {
    for (int worker = 0; worker < workers; ++worker) {
      if (refused[t * static_cast<size_t>(workers) + static_cast<size_t>(worker)] != 0) scans[t].report();
    }
  }
}

int resolve_threads(const char* where, int requested) {
  if (requested < 0 || requested > kMaxThreads) {
    fail(where, ": threads = ", requested, " must be in [0, ", kMaxThreads, "] (0 = hardware concurrency)");
  }
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace spattn::api_detail
