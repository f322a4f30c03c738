// The Python-held mask (torch_mask.hpp).
#include "torch_mask.hpp"

#include "op_arguments.hpp"

#include <spattn/error.hpp>
#include <spattn/shard.hpp>

#include <sparse_formats/csr.hpp>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spattn::torch_ext {

namespace {

// An integer tensor of rank 1 on the CPU, as int64 values.
std::vector<int64_t> index_vector(const at::Tensor& t, const char* name, const char* where = "Mask.from_csr") {
  if (t.device().type() != c10::DeviceType::CPU) fail(where, ": ", name, " is on ", t.device().str(), ", not the CPU");
  if (t.dim() != 1) fail(where, ": ", name, " has ", t.dim(), " dimensions, expected 1");
  if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    fail(where, ": ", name, " has dtype ", c10::toString(t.scalar_type()), ", expected an integer dtype");
  }
  const at::Tensor values = t.to(at::kLong).contiguous();
  const int64_t* data = values.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + values.numel());
}

// A (count, 2) int64 tensor on the CPU of (begin, end) pairs.
std::vector<IndexRange> ranges_of(const at::Tensor& t, const char* name, const char* where = "Mask.select") {
  if (t.device().type() != c10::DeviceType::CPU) fail(where, ": ", name, " is on ", t.device().str(), ", not the CPU");
  if (t.scalar_type() != at::kLong) {
    fail(where, ": ", name, " has dtype ", c10::toString(t.scalar_type()), ", expected int64");
  }
  if (t.dim() != 2 || t.size(1) != 2) {
    fail(where, ": ", name, " has shape ", t.sizes(), ", expected (count, 2): one (begin, end) pair a row");
  }
  const at::Tensor pairs = t.contiguous();
  const int64_t* data = pairs.data_ptr<int64_t>();
  std::vector<IndexRange> ranges(static_cast<size_t>(pairs.size(0)));
  for (size_t i = 0; i < ranges.size(); ++i) ranges[i] = {data[2 * i], data[2 * i + 1]};
  return ranges;
}

at::Tensor as_tensor(const int64_t* data, int64_t count) {
  return at::from_blob(const_cast<int64_t*>(data), {count}, at::kLong).clone();
}

// Live masks by key. Keys are never reused, so a stale key fails instead of naming another mask.
struct Registry {
  std::mutex lock;
  std::unordered_map<int64_t, const TorchMask*> masks;
  int64_t next_key = 1;
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: masks may outlive static teardown
  return *instance;
}

}  // namespace

TorchMask::TorchMask(Mask prepared) : mask(std::move(prepared)) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> guard(r.lock);
  key_ = r.next_key++;
  r.masks.emplace(key_, this);
}

TorchMask::~TorchMask() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> guard(r.lock);
  r.masks.erase(key_);
}

Mask TorchMask::with_key(const char* where, int64_t key) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> guard(r.lock);
  const auto found = r.masks.find(key);
  if (found == r.masks.end()) fail(where, ": mask key ", key, " names no live spattn Mask (pass Mask objects, not keys)");
  return found->second->mask;
}

c10::intrusive_ptr<TorchMask> TorchMask::from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k) {
  return c10::make_intrusive<TorchMask>(Mask::from_spec(spec, seqlen_q, seqlen_k));
}

c10::intrusive_ptr<TorchMask> TorchMask::from_csr(const at::Tensor& crow_indices, const at::Tensor& col_indices,
                                                  int64_t seqlen_q, int64_t seqlen_k) {
  std::vector<int64_t> row_ptr = index_vector(crow_indices, "crow_indices");
  std::vector<int64_t> col_idx = index_vector(col_indices, "col_indices");
  if (seqlen_q < 0 || seqlen_k < 0) fail("Mask.from_csr: shape (", seqlen_q, ", ", seqlen_k, ") is negative");
  if (static_cast<int64_t>(row_ptr.size()) != seqlen_q + 1) {
    fail("Mask.from_csr: crow_indices has ", row_ptr.size(), " entries, expected seqlen_q + 1 = ", seqlen_q + 1);
  }
  sparse_formats::CsrPattern<int64_t> pattern(seqlen_q, seqlen_k, std::move(row_ptr), std::move(col_idx));
  return c10::make_intrusive<TorchMask>(Mask::from_csr(std::move(pattern), "mask"));
}

c10::intrusive_ptr<TorchMask> TorchMask::from_intervals(const at::Tensor& row_ptr, const at::Tensor& begin,
                                                        const at::Tensor& end, int64_t seqlen_q, int64_t seqlen_k) {
  const char* where = "Mask.from_intervals";
  std::vector<int64_t> ptr = index_vector(row_ptr, "row_ptr", where);
  std::vector<int64_t> first = index_vector(begin, "begin", where);
  std::vector<int64_t> last = index_vector(end, "end", where);
  if (seqlen_q < 0 || seqlen_k < 0) fail(where, ": shape (", seqlen_q, ", ", seqlen_k, ") is negative");
  if (static_cast<int64_t>(ptr.size()) != seqlen_q + 1) {
    fail(where, ": row_ptr has ", ptr.size(), " entries, expected seqlen_q + 1 = ", seqlen_q + 1);
  }
  sparse_formats::IntervalPattern pattern(seqlen_q, seqlen_k, std::move(ptr), std::move(first), std::move(last));
  return c10::make_intrusive<TorchMask>(Mask::from_intervals(std::move(pattern), where));
}

std::vector<at::Tensor> TorchMask::intervals() const {
  const sparse_formats::IntervalPattern* p = mask.intervals();
  if (p == nullptr) return {};
  return {as_tensor(p->row_ptr.data(), static_cast<int64_t>(p->row_ptr.size())),
          as_tensor(p->begin.data(), p->num_intervals()), as_tensor(p->end.data(), p->num_intervals())};
}

c10::intrusive_ptr<TorchMask> TorchMask::full(int64_t seqlen_q, int64_t seqlen_k) {
  return c10::make_intrusive<TorchMask>(Mask::full(seqlen_q, seqlen_k));
}

c10::intrusive_ptr<TorchMask> TorchMask::select(const at::Tensor& rows, const at::Tensor& cols) const {
  const std::vector<IndexRange> row_ranges = ranges_of(rows, "rows");
  const std::vector<IndexRange> col_ranges = ranges_of(cols, "cols");
  return renaming_errors("Mask.select", "select_mask",
                         [&] { return c10::make_intrusive<TorchMask>(select_mask(mask, row_ranges, col_ranges)); });
}

at::Tensor TorchMask::attended_keys(const at::Tensor& rows) const {
  const std::vector<IndexRange> row_ranges = ranges_of(rows, "rows", "Mask.attended_keys");
  return renaming_errors("Mask.attended_keys", "attended_keys", [&] {
    const std::vector<int64_t> keys = spattn::attended_keys(mask, row_ranges);
    return as_tensor(keys.data(), static_cast<int64_t>(keys.size()));
  });
}

at::Tensor TorchMask::crow_indices() const {
  const auto csr = mask.csr();
  return as_tensor(csr.row_ptr, csr.num_rows + 1);
}

at::Tensor TorchMask::col_indices() const {
  const auto csr = mask.csr();
  return as_tensor(csr.col_idx, csr.nnz());
}

}  // namespace spattn::torch_ext
