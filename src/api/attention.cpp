// The public attention entry points: validate once, plan, then run the heads' schedules on a team
// of workers (src/cpu/workers.hpp): flash splits every head's tiles over the workers
// (schedules/flash_heads.hpp), small_cache runs whole heads, one worker each.
#include <spattn/attention.hpp>

#include "api/mask_cache.hpp"
#include "cpu/workers.hpp"
#include "schedules/flash.hpp"
#include "schedules/flash_heads.hpp"
#include "schedules/flash_mask.hpp"
#include "schedules/small_cache.hpp"
#include "schedules/sparse_small_cache.hpp"

#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include <sparse_formats/patterns.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

namespace spattn {

namespace {

using io::SlowMatrix;

template <typename T>
void check_rank4(const char* where, const char* name, const TensorView<T>& t) {
  for (int i = 0; i < 4; ++i) {
    if (t.shape[static_cast<size_t>(i)] < 0) {
      fail(where, ": ", name, " has a negative extent ", t.shape[static_cast<size_t>(i)], " in dimension ", i);
    }
  }
  if (t.data == nullptr && t.numel() > 0) fail(where, ": ", name, " has no data but ", t.numel(), " elements");
}

template <typename A, typename B>
void check_same(const char* where, const char* what, const char* a_name, const TensorView<A>& a,
                int a_dim, const char* b_name, const TensorView<B>& b, int b_dim) {
  const int64_t x = a.shape[static_cast<size_t>(a_dim)];
  const int64_t y = b.shape[static_cast<size_t>(b_dim)];
  if (x != y) fail(where, ": ", a_name, " has ", what, " ", x, ", ", b_name, " has ", y);
}

// `t` has q's batch, heads and seqlen (the outputs and per-query inputs do).
template <typename T>
void check_per_query(const char* where, const char* name, const TensorView<T>& t,
                     const TensorView<const float>& q) {
  check_rank4(where, name, t);
  check_same(where, "batch", name, t, 0, "q", q, 0);
  check_same(where, "heads", name, t, 1, "q", q, 1);
  check_same(where, "seqlen", name, t, 2, "q", q, 2);
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

// The q/k/v checks shared by both passes; returns the per-head shape.
bounds::DenseShape check_qkv(const char* where, const TensorView<const float>& q,
                             const TensorView<const float>& k, const TensorView<const float>& v,
                             Algorithm algorithm) {
  check_rank4(where, "q", q);
  check_rank4(where, "k", k);
  check_rank4(where, "v", v);
  check_same(where, "batch", "k", k, 0, "q", q, 0);
  check_same(where, "batch", "v", v, 0, "q", q, 0);
  check_same(where, "heads", "v", v, 1, "k", k, 1);
  check_same(where, "head_dim", "k", k, 3, "q", q, 3);
  check_same(where, "seqlen", "v", v, 2, "k", k, 2);
  if (k.heads() == 0 ? q.heads() != 0 : q.heads() % k.heads() != 0) {
    fail(where, ": q has ", q.heads(), " heads, not a multiple of k's ", k.heads(), " heads");
  }
  if (algorithm != Algorithm::reference && k.heads() != q.heads()) {
    fail(where, ": grouped-query attention (k has ", k.heads(), " heads, q has ", q.heads(),
         ") runs with algorithm reference only in this version");
  }
  return {q.seqlen(), k.seqlen(), q.head_dim(), v.head_dim()};
}

SlowMatrix<const float> head_matrix(const TensorView<const float>& t, int64_t b, int64_t h) {
  return SlowMatrix<const float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}
SlowMatrix<float> head_matrix(const TensorView<float>& t, int64_t b, int64_t h) {
  return SlowMatrix<float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}

// A float view as a contiguous double copy, for the reference.
struct DoubleCopy {
  std::vector<double> data;
  TensorView<const double> view;
};
DoubleCopy to_double(const TensorView<const float>& t) {
  DoubleCopy copy;
  copy.data.reserve(static_cast<size_t>(t.numel()));
  for (int64_t b = 0; b < t.batch(); ++b)
    for (int64_t h = 0; h < t.heads(); ++h)
      for (int64_t s = 0; s < t.seqlen(); ++s)
        for (int64_t d = 0; d < t.head_dim(); ++d) copy.data.push_back(t.at(b, h, s, d));
  copy.view = TensorView<const double>::contiguous(copy.data.data(), t.batch(), t.heads(), t.seqlen(), t.head_dim());
  return copy;
}
void copy_out(const std::vector<double>& from, const TensorView<float>& to) {
  size_t i = 0;
  for (int64_t b = 0; b < to.batch(); ++b)
    for (int64_t h = 0; h < to.heads(); ++h)
      for (int64_t s = 0; s < to.seqlen(); ++s)
        for (int64_t d = 0; d < to.head_dim(); ++d) to.at(b, h, s, d) = static_cast<float>(from[i++]);
}

Plan make_plan(const bounds::DenseShape& shape, const Mask& mask, int64_t cache_words, Pass pass,
               Algorithm algorithm, int64_t num_heads) {
  const Algorithm planned = algorithm == Algorithm::reference ? Algorithm::automatic : algorithm;
  return plan_attention(shape, mask, cache_words, pass, planned, num_heads);
}

void check_mask(const char* where, const Mask& mask, const TensorView<const float>& q,
                const TensorView<const float>& k) {
  if (mask.seqlen_q() != q.seqlen() || mask.seqlen_k() != k.seqlen()) {
    fail(where, ": mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", but q has seqlen ",
         q.seqlen(), " and k has seqlen ", k.seqlen());
  }
}

// Runs the heads' schedules for the planned algorithm; a full mask takes the dense schedules, any
// other the block-sparse flash or the density-adaptive small_cache. Every worker has its own fast
// memory of M words and, when counting, its own ledger, merged into the caller's at the end.
class HeadRunner {
 public:
  HeadRunner(const Plan& plan, const Mask& mask, int64_t cache_words, Pass pass, int threads)
      : plan_(plan), mask_(mask), cache_words_(cache_words), pass_(pass), threads_(threads) {
    const schedules::HeadShape head{plan.shape.seqlen_q, plan.shape.seqlen_k, plan.shape.head_dim,
                                    plan.shape.head_dim_v};
    const bool sparse = !mask.is_full();
    if (plan.algorithm == Algorithm::flash) {
      flash_tiles_ = schedules::flash_tiles(head, cache_words, pass_,
                                            sparse ? schedules::FlashMasking::block_sparse : schedules::FlashMasking::dense);
      if (sparse) flash_mask_ = mask.cache().flash(mask, flash_tiles_, pass_);
    } else if (sparse) {
      sparse_mask_ = mask.cache().small_cache(mask);
      sparse_tiles_ = schedules::sparse_small_cache_tiles(head, *sparse_mask_, cache_words, pass_);
    } else {
      small_tiles_ = schedules::small_cache_tiles(head, cache_words, pass_);
    }
  }

  template <typename Problem>
  void run(const std::vector<Problem>& heads, io::Ledger* ledger) const {
    constexpr bool forward = std::is_same_v<Problem, schedules::HeadForward>;
    const std::string name = std::string(algorithm_name(plan_.algorithm)) + (mask_.is_full() ? "" : " (sparse)") +
                             (forward ? " forward" : " backward");
    if (plan_.algorithm == Algorithm::flash) {
      const schedules::FlashTeam team{threads_, cache_words_, ledger, name};
      if constexpr (forward) {
        schedules::flash_forward_heads(team, heads, flash_tiles_, flash_mask_.get());
      } else {
        schedules::flash_backward_heads(team, heads, flash_tiles_, flash_mask_.get());
      }
      return;
    }
    // small_cache: whole heads, worker w taking heads w, w + W, ...
    const auto num_heads = static_cast<int64_t>(heads.size());
    if (num_heads == 0) return;
    const int workers = static_cast<int>(std::clamp<int64_t>(num_heads, 1, threads_));
    cpu::WorkerMemories memories(workers, cache_words_, ledger, name);
    cpu::run_workers(workers, [&](int worker) {
      cpu::for_each_item(worker, workers, num_heads, [&](int64_t head) {
        run_small_cache(memories[worker], heads[static_cast<size_t>(head)]);
      });
    });
    memories.merge_ledgers();
  }

 private:
  template <typename Problem>
  void run_small_cache(io::FastMemory& fast, const Problem& problem) const {
    constexpr bool forward = std::is_same_v<Problem, schedules::HeadForward>;
    if (sparse_mask_) {
      if constexpr (forward) {
        schedules::sparse_small_cache_forward(fast, problem, *sparse_mask_, sparse_tiles_);
      } else {
        schedules::sparse_small_cache_backward(fast, problem, *sparse_mask_, sparse_tiles_);
      }
    } else {
      if constexpr (forward) {
        schedules::small_cache_forward(fast, problem, small_tiles_);
      } else {
        schedules::small_cache_backward(fast, problem, small_tiles_);
      }
    }
  }

  const Plan& plan_;
  const Mask& mask_;
  int64_t cache_words_;
  Pass pass_;
  int threads_;
  schedules::FlashTiles flash_tiles_;
  std::shared_ptr<const schedules::FlashMask> flash_mask_;
  schedules::SmallCacheTiles small_tiles_;
  std::shared_ptr<const schedules::SparseSmallCacheMask> sparse_mask_;
  schedules::SparseSmallCacheTiles sparse_tiles_;
};

}  // namespace

Plan attention_forward(TensorView<const float> q, TensorView<const float> k,
                       TensorView<const float> v, TensorView<float> o, TensorView<float> lse,
                       const AttentionOptions& options) {
  return attention_forward(q, k, v, o, lse, Mask::full(std::max<int64_t>(q.seqlen(), 0), std::max<int64_t>(k.seqlen(), 0)), options);
}

Plan attention_forward(TensorView<const float> q, TensorView<const float> k,
                       TensorView<const float> v, TensorView<float> o, TensorView<float> lse,
                       const Mask& mask, const AttentionOptions& options) {
  const char* where = "attention_forward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v, options.algorithm);
  check_per_query(where, "o", o, q);
  check_same(where, "head_dim", "o", o, 3, "v", v, 3);
  check_per_query(where, "lse", lse, q);
  if (lse.head_dim() != 1) fail(where, ": lse must have last extent 1, has ", lse.head_dim());
  check_mask(where, mask, q, k);
  const double scale = resolve_scale(where, options, q.head_dim());
  const int64_t cache_words = resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  const Plan plan = make_plan(shape, mask, cache_words, Pass::forward, options.algorithm, q.batch() * q.heads());

  if (options.algorithm == Algorithm::reference) {
    const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v);
    const auto result = reference::forward<int64_t>(qd.view, kd.view, vd.view, {mask.csr()}, scale);
    copy_out(result.o, o);
    copy_out(result.lse, lse);
    return plan;
  }
  const HeadRunner runner(plan, mask, cache_words, Pass::forward, threads);
  std::vector<schedules::HeadForward> heads;
  heads.reserve(static_cast<size_t>(q.batch() * q.heads()));
  for (int64_t b = 0; b < q.batch(); ++b) {
    for (int64_t h = 0; h < q.heads(); ++h) {
      heads.push_back({head_matrix(q, b, h), head_matrix(k, b, h), head_matrix(v, b, h),
                       head_matrix(o, b, h), head_matrix(lse, b, h), static_cast<float>(scale)});
    }
  }
  runner.run(heads, options.ledger);
  return plan;
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k,
                        TensorView<const float> v, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const AttentionOptions& options) {
  return attention_backward(q, k, v, o, lse, d_o, dq, dk, dv,
                            Mask::full(std::max<int64_t>(q.seqlen(), 0), std::max<int64_t>(k.seqlen(), 0)), options);
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k,
                        TensorView<const float> v, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const Mask& mask, const AttentionOptions& options) {
  const char* where = "attention_backward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v, options.algorithm);
  for (const auto& [name, t] : {std::pair<const char*, TensorView<const float>>{"o", o}, {"d_o", d_o}}) {
    check_per_query(where, name, t, q);
    check_same(where, "head_dim", name, t, 3, "v", v, 3);
  }
  check_per_query(where, "lse", lse, q);
  if (lse.head_dim() != 1) fail(where, ": lse must have last extent 1, has ", lse.head_dim());
  for (const auto& [name, grad, like] :
       {std::tuple<const char*, TensorView<float>, TensorView<const float>>{"dq", dq, q}, {"dk", dk, k}, {"dv", dv, v}}) {
    check_rank4(where, name, grad);
    for (int dim = 0; dim < 4; ++dim) {
      if (grad.shape[static_cast<size_t>(dim)] != like.shape[static_cast<size_t>(dim)]) {
        fail(where, ": ", name, " has extent ", grad.shape[static_cast<size_t>(dim)], " in dimension ", dim,
             ", its input has ", like.shape[static_cast<size_t>(dim)]);
      }
    }
  }
  check_mask(where, mask, q, k);
  const double scale = resolve_scale(where, options, q.head_dim());
  const int64_t cache_words = resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  const Plan plan = make_plan(shape, mask, cache_words, Pass::backward, options.algorithm, q.batch() * q.heads());

  if (options.algorithm == Algorithm::reference) {
    const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v), dod = to_double(d_o);
    const auto result = reference::backward<int64_t>(qd.view, kd.view, vd.view, dod.view, {mask.csr()}, scale);
    copy_out(result.dq, dq);
    copy_out(result.dk, dk);
    copy_out(result.dv, dv);
    return plan;
  }
  const HeadRunner runner(plan, mask, cache_words, Pass::backward, threads);
  const int64_t num_heads = q.batch() * q.heads();
  // Slow-memory scratch for D, one column per head (the heads run at the same time).
  std::vector<float> delta(static_cast<size_t>(num_heads * q.seqlen()));
  std::vector<schedules::HeadBackward> heads;
  heads.reserve(static_cast<size_t>(num_heads));
  for (int64_t b = 0; b < q.batch(); ++b) {
    for (int64_t h = 0; h < q.heads(); ++h) {
      float* head_delta = delta.data() + static_cast<size_t>(heads.size()) * static_cast<size_t>(q.seqlen());
      heads.push_back({head_matrix(q, b, h), head_matrix(k, b, h), head_matrix(v, b, h),
                       head_matrix(o, b, h), head_matrix(lse, b, h), head_matrix(d_o, b, h),
                       SlowMatrix<float>::dense(head_delta, q.seqlen(), 1),
                       head_matrix(dq, b, h), head_matrix(dk, b, h), head_matrix(dv, b, h),
                       static_cast<float>(scale)});
    }
  }
  runner.run(heads, options.ledger);
  return plan;
}

}  // namespace spattn
