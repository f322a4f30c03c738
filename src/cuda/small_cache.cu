// The cuSPARSE small-cache path (small_cache.hpp). Every head runs on the caller's stream in a
// fixed order; grouped-query heads accumulate dK, dV with beta = 1 in turn (no atomics of ours).
// Operands are gathered into contiguous fp32 copies first (any strides, any element type).
#include "cuda/small_cache.hpp"

#include "cuda/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/flash_kernels.hpp"  // launch_flash_delta: D = rowsum(dO ∘ O)
#include "schedules/common/tile_math.hpp"

#include <algorithm>
#include <memory>

namespace spattn::cuda::detail {
namespace {

using namespace spattn::tile_math;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

unsigned blocks_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(std::min<int64_t>((work + per_block - 1) / per_block, 65535));
}

// ---- kernels ---------------------------------------------------------------------------------

template <typename T>
__global__ void gather_kernel(Strided<const T> src, int64_t b, int64_t h, int64_t rows, int64_t cols,
                              float* dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = load_float(src.at(b, h, i / cols, i % cols));
  }
}

template <typename T>
__global__ void scatter_kernel(const float* src, int64_t rows, int64_t cols, Strided<T> dst, int64_t b,
                               int64_t h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    store_float(dst.at(b, h, i / cols, i % cols), src[i]);
  }
}

__global__ void permute_kernel(const float* src, const int32_t* perm, int64_t count, float* dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[perm[i]];
  }
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Rows handed to warps: warp w of the grid takes rows w, w + W, ... (whole warps stay together, so
// the shuffles see all 32 lanes).
#define SPATTN_FOR_EACH_ROW(row, rows)                                                          \
  for (int64_t row = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; row < (rows);      \
       row += int64_t{gridDim.x} * blockDim.x / 32)

// vals (scores Q K^T) -> P = softmax(scale vals) per row; lse(b, h, row) = the row's LSE (-inf for
// an empty row, which has no values to write).
__global__ void softmax_rows_kernel(const int32_t* row_ptr, int64_t rows, float scale, float* vals,
                                    Strided<float> lse, int64_t b, int64_t h) {
  const int lane = threadIdx.x % 32;
  SPATTN_FOR_EACH_ROW(row, rows) {
    const int32_t begin = row_ptr[row], end = row_ptr[row + 1];
    float m = negative_infinity();
    for (int32_t i = begin + lane; i < end; i += 32) m = fmaxf(m, scale * vals[i]);
    m = warp_max(m);
    const SoftmaxStep step = online_softmax_step(negative_infinity(), m);
    float l = 0.0f;
    for (int32_t i = begin + lane; i < end; i += 32) l += expf(scale * vals[i] - step.shift);
    l = warp_sum(l);
    const float row_lse = finish_lse(step.max, l);
    for (int32_t i = begin + lane; i < end; i += 32) vals[i] = probability(scale * vals[i], row_lse);
    if (lane == 0) *lse.at(b, h, row, 0) = row_lse;
  }
}

// vals (scores) -> P = e^{scale vals - LSE}.
__global__ void probability_rows_kernel(const int32_t* row_ptr, int64_t rows, float scale, float* vals,
                                        Strided<const float> lse, int64_t b, int64_t h) {
  const int lane = threadIdx.x % 32;
  SPATTN_FOR_EACH_ROW(row, rows) {
    const float row_lse = *lse.at(b, h, row, 0);
    for (int32_t i = row_ptr[row] + lane; i < row_ptr[row + 1]; i += 32) {
      vals[i] = probability(scale * vals[i], row_lse);
    }
  }
}

// grad (dP) -> dS = P (dP - D).
__global__ void gradient_rows_kernel(const int32_t* row_ptr, int64_t rows, const float* p, float* grad,
                                     const float* delta) {
  const int lane = threadIdx.x % 32;
  SPATTN_FOR_EACH_ROW(row, rows) {
    for (int32_t i = row_ptr[row] + lane; i < row_ptr[row + 1]; i += 32) {
      grad[i] = score_gradient(p[i], grad[i], delta[row]);
    }
  }
}
#undef SPATTN_FOR_EACH_ROW

// ---- cuSPARSE handles and descriptors (RAII) --------------------------------------------

struct Handle {
  cusparseHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;  // the handle's stream (cusparseSetStream), for our own memsets
  explicit Handle(cudaStream_t s) : stream(s) {
    SPATTN_CUSPARSE_CHECK(cusparseCreate(&handle));
    const cusparseStatus_t status = cusparseSetStream(handle, stream);
    if (status != CUSPARSE_STATUS_SUCCESS) {
      cusparseDestroy(handle);
      SPATTN_CUSPARSE_CHECK(status);
    }
  }
  ~Handle() { cusparseDestroy(handle); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// A dense fp32 matrix: rows x cols with leading dimension ld, in `order` (ld = its rows or cols:
// `count` elements, no padding).
struct Dense {
  cusparseDnMatDescr_t descr = nullptr;
  float* data = nullptr;
  int64_t count = 0;
  Dense(int64_t rows, int64_t cols, int64_t ld, float* values, cusparseOrder_t order)
      : data(values), count(rows * cols) {
    SPATTN_CUSPARSE_CHECK(cusparseCreateDnMat(&descr, rows, cols, ld, values, CUDA_R_32F, order));
  }
  ~Dense() { cusparseDestroyDnMat(descr); }
  Dense(const Dense&) = delete;
  Dense& operator=(const Dense&) = delete;
};
// Row-major rows x cols (ld = cols).
std::unique_ptr<Dense> row_major(float* data, int64_t rows, int64_t cols) {
  return std::make_unique<Dense>(rows, cols, cols, data, CUSPARSE_ORDER_ROW);
}
// The transpose of a row-major rows x cols matrix, as a column-major cols x rows one (same memory).
std::unique_ptr<Dense> transposed(float* data, int64_t rows, int64_t cols) {
  return std::make_unique<Dense>(cols, rows, cols, data, CUSPARSE_ORDER_COL);
}

// The mask's CSR (and its transpose) on the device, 32-bit indices.
struct DeviceCsr {
  int64_t rows = 0, cols = 0, nnz = 0;
  DeviceBuffer<int32_t> row_ptr, col, t_row_ptr, t_col, perm;
};
std::unique_ptr<DeviceCsr> upload_mask(const Mask& mask, bool with_transpose) {
  const device::Csr32 csr = device::csr32(mask, "cuda small_cache: mask");
  auto d = std::make_unique<DeviceCsr>();
  d->rows = csr.num_rows;
  d->cols = csr.num_cols;
  d->nnz = static_cast<int64_t>(csr.col.size());
  d->row_ptr = DeviceBuffer<int32_t>(csr.row_ptr);
  d->col = DeviceBuffer<int32_t>(csr.col);
  if (with_transpose) {
    const device::Csr32 t = device::csr32_transpose(csr);
    d->t_row_ptr = DeviceBuffer<int32_t>(t.row_ptr);
    d->t_col = DeviceBuffer<int32_t>(t.col);
    d->perm = DeviceBuffer<int32_t>(t.perm);
  }
  return d;
}

// A CSR matrix descriptor over a mask's structure and a values array.
struct Sparse {
  cusparseSpMatDescr_t descr = nullptr;
  float* values = nullptr;
  int64_t nnz = 0;
  Sparse(int64_t rows, int64_t cols, int64_t count, int32_t* row_ptr, int32_t* col, float* vals)
      : values(vals), nnz(count) {
    SPATTN_CUSPARSE_CHECK(cusparseCreateCsr(&descr, rows, cols, count, row_ptr, col, vals, CUSPARSE_INDEX_32I,
                                            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  }
  ~Sparse() { cusparseDestroySpMat(descr); }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
};

// Scratch that must outlive the asynchronous calls using it: freed after the stream is synchronized
// (the functions below end with a synchronization).
struct Workspace {
  std::vector<DeviceBuffer<char>> buffers;
  void* get(size_t bytes) {
    buffers.emplace_back(bytes);
    return buffers.back().data();
  }
};

void zero(float* data, int64_t count, cudaStream_t stream) {
  if (count > 0) SPATTN_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(count) * sizeof(float), stream));
}

// C (on C's pattern) = alpha A B. With beta = 0 the output's old values must not matter, but
// cuSPARSE does not document that it never reads them (0 * NaN = NaN, and a recycled cudaMalloc
// block can hold NaN), so they are zeroed first: one memset of nnz words.
void sddmm(const Handle& h, Workspace& ws, float alpha, const Dense& a, const Dense& b, const Sparse& c) {
  const float beta = 0.0f;
  zero(c.values, c.nnz, h.stream);
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes = 0;
  SPATTN_CUSPARSE_CHECK(cusparseSDDMM_bufferSize(h.handle, op, op, &alpha, a.descr, b.descr, &beta, c.descr,
                                                 CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes));
  SPATTN_CUSPARSE_CHECK(cusparseSDDMM(h.handle, op, op, &alpha, a.descr, b.descr, &beta, c.descr, CUDA_R_32F,
                                      CUSPARSE_SDDMM_ALG_DEFAULT, ws.get(bytes)));
}

// C = alpha A B + beta C, A sparse (C zeroed first when beta = 0, as for sddmm).
void spmm(const Handle& h, Workspace& ws, float alpha, const Sparse& a, const Dense& b, float beta,
          const Dense& c) {
  if (beta == 0.0f) zero(c.data, c.count, h.stream);
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes = 0;
  SPATTN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(h.handle, op, op, &alpha, a.descr, b.descr, &beta, c.descr,
                                                CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
  SPATTN_CUSPARSE_CHECK(cusparseSpMM(h.handle, op, op, &alpha, a.descr, b.descr, &beta, c.descr, CUDA_R_32F,
                                     CUSPARSE_SPMM_ALG_DEFAULT, ws.get(bytes)));
}

template <typename T>
void gather(const TensorView<const T>& view, int64_t b, int64_t h, float* dst, cudaStream_t stream) {
  const int64_t count = view.seqlen() * view.head_dim();
  if (count == 0) return;
  gather_kernel<T><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(strided(view), b, h, view.seqlen(),
                                                                         view.head_dim(), dst);
  SPATTN_CUDA_CHECK_LAUNCH("small_cache gather_kernel");
}

template <typename T>
void scatter(const float* src, const TensorView<T>& view, int64_t b, int64_t h, cudaStream_t stream) {
  const int64_t count = view.seqlen() * view.head_dim();
  if (count == 0) return;
  scatter_kernel<T><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(src, view.seqlen(), view.head_dim(),
                                                                          strided(view), b, h);
  SPATTN_CUDA_CHECK_LAUNCH("small_cache scatter_kernel");
}

void permute(const float* src, const DeviceCsr& csr, float* dst, cudaStream_t stream) {
  if (csr.nnz == 0) return;
  permute_kernel<<<blocks_for(csr.nnz, kThreads), kThreads, 0, stream>>>(src, csr.perm.data(), csr.nnz, dst);
  SPATTN_CUDA_CHECK_LAUNCH("small_cache permute_kernel");
}

unsigned row_blocks(int64_t rows) { return blocks_for(rows, kWarpsPerBlock); }

// The masks on the device: one per distinct Mask (a shared mask is uploaded once).
std::vector<std::unique_ptr<DeviceCsr>> upload_masks(const std::vector<Mask>& masks, bool with_transpose) {
  std::vector<std::unique_ptr<DeviceCsr>> result;
  for (const Mask& mask : masks) result.push_back(upload_mask(mask, with_transpose));
  return result;
}

}  // namespace

template <typename T>
DeviceRun small_cache_forward(const device::DeviceShape& s, const ForwardViews<T>& views,
                              const std::vector<Mask>& masks, float scale, cudaStream_t stream) {
  const auto csrs = upload_masks(masks, false);
  int64_t max_nnz = 0;
  for (const auto& c : csrs) max_nnz = std::max(max_nnz, c->nnz);
  DeviceBuffer<float> q(static_cast<size_t>(s.seqlen_q * s.head_dim));
  DeviceBuffer<float> k(static_cast<size_t>(s.seqlen_k * s.head_dim));
  DeviceBuffer<float> v(static_cast<size_t>(s.seqlen_k * s.head_dim_v));
  DeviceBuffer<float> o(static_cast<size_t>(s.seqlen_q * s.head_dim_v));
  DeviceBuffer<float> vals(static_cast<size_t>(max_nnz));
  Handle handle(stream);
  Workspace ws;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const DeviceCsr& m = *csrs[static_cast<size_t>(masks.size() == 1 ? 0 : h)];
      const int64_t hk = kv_head_of(h, s.heads, s.kv_heads);
      if (m.nnz == 0) {
        zero(o.data(), s.seqlen_q * s.head_dim_v, stream);
      } else {
        gather(views.q, b, h, q.data(), stream);
        gather(views.k, b, hk, k.data(), stream);
        gather(views.v, b, hk, v.data(), stream);
        Sparse p(m.rows, m.cols, m.nnz, m.row_ptr.data(), m.col.data(), vals.data());
        sddmm(handle, ws, 1.0f, *row_major(q.data(), s.seqlen_q, s.head_dim),
              *transposed(k.data(), s.seqlen_k, s.head_dim), p);
      }
      // Empty rows (and an empty mask) get LSE = -inf here.
      if (s.seqlen_q > 0) {
        softmax_rows_kernel<<<row_blocks(s.seqlen_q), kThreads, 0, stream>>>(
            m.row_ptr.data(), s.seqlen_q, scale, vals.data(), strided(views.lse), b, h);
        SPATTN_CUDA_CHECK_LAUNCH("small_cache softmax_rows_kernel");
      }
      if (m.nnz > 0) {
        Sparse p(m.rows, m.cols, m.nnz, m.row_ptr.data(), m.col.data(), vals.data());
        spmm(handle, ws, 1.0f, p, *row_major(v.data(), s.seqlen_k, s.head_dim_v), 0.0f,
             *row_major(o.data(), s.seqlen_q, s.head_dim_v));
      }
      scatter(o.data(), views.o, b, h, stream);
    }
  }
  SPATTN_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch is freed
  DeviceRun run;
  run.algorithm = CudaAlgorithm::small_cache;
  run.pass = Pass::forward;
  return run;
}

template <typename T>
DeviceRun small_cache_backward(const device::DeviceShape& s, const BackwardViews<T>& views,
                               const std::vector<Mask>& masks, float scale, cudaStream_t stream) {
  const auto csrs = upload_masks(masks, true);
  int64_t max_nnz = 0;
  for (const auto& c : csrs) max_nnz = std::max(max_nnz, c->nnz);
  const int64_t nq = s.seqlen_q, nk = s.seqlen_k, d = s.head_dim, e = s.head_dim_v;
  DeviceBuffer<float> q(static_cast<size_t>(nq * d)), k(static_cast<size_t>(nk * d));
  DeviceBuffer<float> v(static_cast<size_t>(nk * e)), d_o(static_cast<size_t>(nq * e));
  DeviceBuffer<float> dq(static_cast<size_t>(nq * d)), dk(static_cast<size_t>(nk * d));
  DeviceBuffer<float> dv(static_cast<size_t>(nk * e));
  DeviceBuffer<float> p(static_cast<size_t>(max_nnz)), ds(static_cast<size_t>(max_nnz));
  DeviceBuffer<float> t_vals(static_cast<size_t>(max_nnz));
  DeviceBuffer<float> delta(static_cast<size_t>(s.batch * s.heads * nq));
  {
    DeltaParams<T> dp;
    dp.o = strided(views.o);
    dp.d_o = strided(views.d_o);
    dp.delta = delta.data();
    dp.dims = {s.batch, s.heads, s.kv_heads, nq, nk, d, e, scale};
    launch_flash_delta(dp, stream);
  }
  Handle handle(stream);
  Workspace ws;
  const int64_t group = s.kv_heads > 0 ? s.heads / s.kv_heads : 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t hk = 0; hk < s.kv_heads; ++hk) {
      zero(dk.data(), nk * d, stream);
      zero(dv.data(), nk * e, stream);
      gather(views.k, b, hk, k.data(), stream);
      gather(views.v, b, hk, v.data(), stream);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const DeviceCsr& m = *csrs[static_cast<size_t>(masks.size() == 1 ? 0 : h)];
        if (m.nnz == 0) {
          zero(dq.data(), nq * d, stream);
          scatter(dq.data(), views.dq, b, h, stream);
          continue;
        }
        gather(views.q, b, h, q.data(), stream);
        gather(views.d_o, b, h, d_o.data(), stream);
        Sparse sp_p(m.rows, m.cols, m.nnz, m.row_ptr.data(), m.col.data(), p.data());
        Sparse sp_ds(m.rows, m.cols, m.nnz, m.row_ptr.data(), m.col.data(), ds.data());
        Sparse sp_t(m.cols, m.rows, m.nnz, m.t_row_ptr.data(), m.t_col.data(), t_vals.data());
        // P = e^{scale Q K^T - LSE} on the mask
        sddmm(handle, ws, 1.0f, *row_major(q.data(), nq, d), *transposed(k.data(), nk, d), sp_p);
        probability_rows_kernel<<<row_blocks(nq), kThreads, 0, stream>>>(m.row_ptr.data(), nq, scale, p.data(),
                                                                        strided(views.lse), b, h);
        SPATTN_CUDA_CHECK_LAUNCH("small_cache probability_rows_kernel");
        // dS = P (dO V^T - D)
        sddmm(handle, ws, 1.0f, *row_major(d_o.data(), nq, e), *transposed(v.data(), nk, e), sp_ds);
        gradient_rows_kernel<<<row_blocks(nq), kThreads, 0, stream>>>(m.row_ptr.data(), nq, p.data(), ds.data(),
                                                                     delta.data() + (b * s.heads + h) * nq);
        SPATTN_CUDA_CHECK_LAUNCH("small_cache gradient_rows_kernel");
        // dQ = scale dS K
        spmm(handle, ws, scale, sp_ds, *row_major(k.data(), nk, d), 0.0f, *row_major(dq.data(), nq, d));
        scatter(dq.data(), views.dq, b, h, stream);
        // dV += P^T dO, dK += scale dS^T Q (the group's heads in order)
        permute(p.data(), m, t_vals.data(), stream);
        spmm(handle, ws, 1.0f, sp_t, *row_major(d_o.data(), nq, e), 1.0f, *row_major(dv.data(), nk, e));
        permute(ds.data(), m, t_vals.data(), stream);
        spmm(handle, ws, scale, sp_t, *row_major(q.data(), nq, d), 1.0f, *row_major(dk.data(), nk, d));
      }
      scatter(dk.data(), views.dk, b, hk, stream);
      scatter(dv.data(), views.dv, b, hk, stream);
    }
  }
  SPATTN_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch is freed
  DeviceRun run;
  run.algorithm = CudaAlgorithm::small_cache;
  run.pass = Pass::backward;
  return run;
}

#define SPATTN_SMALL_CACHE_PATH(T)                                                                       \
  template DeviceRun small_cache_forward<T>(const device::DeviceShape&, const ForwardViews<T>&,         \
                                            const std::vector<Mask>&, float, cudaStream_t);             \
  template DeviceRun small_cache_backward<T>(const device::DeviceShape&, const BackwardViews<T>&,       \
                                             const std::vector<Mask>&, float, cudaStream_t);
SPATTN_SMALL_CACHE_PATH(float)
SPATTN_SMALL_CACHE_PATH(half_t)
SPATTN_SMALL_CACHE_PATH(bfloat16_t)
#undef SPATTN_SMALL_CACHE_PATH

}  // namespace spattn::cuda::detail
