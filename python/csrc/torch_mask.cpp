// The Python-held mask (torch_mask.hpp).
#include "torch_mask.hpp"

#include "op_arguments.hpp"

#include <spattn/error.hpp>
#include <spattn/shard.hpp>

#include <sparse_formats/csr.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
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

namespace {

// Block indices as the block form's int32, refusing values int32 cannot hold (validate checks the
// rest: order, range, monotone row pointers).
std::vector<int32_t> block_index_vector(const at::Tensor& t, const char* name, const char* where) {
  const std::vector<int64_t> values = index_vector(t, name, where);
  std::vector<int32_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < std::numeric_limits<int32_t>::min() || values[i] > std::numeric_limits<int32_t>::max()) {
      fail(where, ": ", name, "[", i, "] = ", values[i], " does not fit the block form's int32 indices");
    }
    out[i] = static_cast<int32_t>(values[i]);
  }
  return out;
}

void check_block_shape(const char* where, int64_t block_m, int64_t block_n, int64_t seqlen_q, int64_t seqlen_k) {
  if (seqlen_q < 0 || seqlen_k < 0) fail(where, ": shape (", seqlen_q, ", ", seqlen_k, ") is negative");
  if (block_m < 1 || block_n < 1) fail(where, ": block size (", block_m, ", ", block_n, ") must be positive");
}

}  // namespace

c10::intrusive_ptr<TorchMask> TorchMask::from_blocks(const at::Tensor& block_row_ptr, const at::Tensor& block_col_idx,
                                                     const at::Tensor& partial, const at::Tensor& bits, int64_t block_m,
                                                     int64_t block_n, int64_t seqlen_q, int64_t seqlen_k) {
  const char* where = "Mask.from_blocks";
  check_block_shape(where, block_m, block_n, seqlen_q, seqlen_k);
  sparse_formats::BsrMask<int32_t> blocks;
  blocks.blocks.num_rows = seqlen_q;
  blocks.blocks.num_cols = seqlen_k;
  blocks.blocks.block_m = block_m;
  blocks.blocks.block_n = block_n;
  blocks.blocks.block_row_ptr = block_index_vector(block_row_ptr, "block_row_ptr", where);
  blocks.blocks.block_col_idx = block_index_vector(block_col_idx, "block_col_idx", where);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"partial", &partial}, {"bits", &bits}}) {
    if (t->device().type() != c10::DeviceType::CPU) fail(where, ": ", name, " is on ", t->device().str(), ", not the CPU");
    if (t->scalar_type() != at::kBool) fail(where, ": ", name, " has dtype ", c10::toString(t->scalar_type()), ", expected bool");
  }
  if (partial.dim() != 1 || partial.size(0) != static_cast<int64_t>(blocks.blocks.block_col_idx.size())) {
    fail(where, ": partial has shape ", partial.sizes(), ", expected (", blocks.blocks.block_col_idx.size(),
         "): one flag per stored block");
  }
  const at::Tensor flags = partial.contiguous();
  const bool* flag = flags.data_ptr<bool>();
  int64_t num_partial = 0;
  for (int64_t b = 0; b < flags.size(0); ++b) {
    blocks.kind.push_back(flag[b] ? sparse_formats::BlockKind::partial : sparse_formats::BlockKind::full);
    blocks.partial_slot.push_back(flag[b] ? num_partial++ : -1);
  }
  if (bits.dim() != 3 || bits.size(0) != num_partial || bits.size(1) != block_m || bits.size(2) != block_n) {
    fail(where, ": bits has shape ", bits.sizes(), ", expected (", num_partial, ", ", block_m, ", ", block_n,
         "): the pairs of each partial block");
  }
  const int64_t words = blocks.words_per_block();
  blocks.partial_bits.assign(static_cast<size_t>(num_partial * words), 0);
  const at::Tensor pairs = bits.contiguous();
  const bool* set = pairs.data_ptr<bool>();
  for (int64_t p = 0; p < num_partial; ++p) {
    uint64_t* out = blocks.partial_bits.data() + p * words;
    for (int64_t e = 0; e < block_m * block_n; ++e) {
      if (set[p * block_m * block_n + e]) out[e / 64] |= uint64_t{1} << (e % 64);
    }
  }
  return c10::make_intrusive<TorchMask>(Mask::from_blocks(std::move(blocks), where));
}

c10::intrusive_ptr<TorchMask> TorchMask::from_block_indices(const at::Tensor& indices, const at::Tensor& counts,
                                                            int64_t block_m, int64_t block_n, int64_t seqlen_q,
                                                            int64_t seqlen_k) {
  const char* where = "Mask.from_block_indices";
  check_block_shape(where, block_m, block_n, seqlen_q, seqlen_k);
  const int64_t query_blocks = sparse_formats::ceil_div(seqlen_q, block_m);
  const int64_t key_blocks = sparse_formats::ceil_div(seqlen_k, block_n);
  if (indices.dim() != 2 || indices.size(0) != query_blocks) {
    fail(where, ": indices has shape ", indices.sizes(), ", expected (", query_blocks,
         ", width): a row of key blocks for each of the ceil(seqlen_q / block_q) = ", query_blocks, " query blocks");
  }
  if (indices.device().type() != c10::DeviceType::CPU || counts.device().type() != c10::DeviceType::CPU) {
    fail(where, ": indices and counts must be on the CPU (they are on ", indices.device().str(), " and ",
         counts.device().str(), ")");
  }
  if (!at::isIntegralType(indices.scalar_type(), false)) {
    fail(where, ": indices has dtype ", c10::toString(indices.scalar_type()), ", expected an integer dtype");
  }
  const std::vector<int64_t> count = index_vector(counts, "counts", where);
  if (static_cast<int64_t>(count.size()) != query_blocks) {
    fail(where, ": counts has ", count.size(), " entries, expected one per query block (", query_blocks, ")");
  }
  const int64_t width = indices.size(1);
  const at::Tensor rows = indices.to(at::kLong).contiguous();
  const int64_t* index = rows.data_ptr<int64_t>();
  sparse_formats::BsrMask<int32_t> blocks;
  blocks.blocks.num_rows = seqlen_q;
  blocks.blocks.num_cols = seqlen_k;
  blocks.blocks.block_m = block_m;
  blocks.blocks.block_n = block_n;
  if (key_blocks > std::numeric_limits<int32_t>::max()) {
    fail(where, ": ", key_blocks, " key blocks do not fit the block form's int32 indices");
  }
  std::vector<int64_t> row;
  for (int64_t i = 0; i < query_blocks; ++i) {
    if (count[static_cast<size_t>(i)] < 0 || count[static_cast<size_t>(i)] > width) {
      fail(where, ": counts[", i, "] = ", count[static_cast<size_t>(i)], " is outside [0, ", width,
           "] (the index rows hold ", width, " entries)");
    }
    row.assign(index + i * width, index + i * width + count[static_cast<size_t>(i)]);
    for (size_t j = 0; j < row.size(); ++j) {
      if (row[j] < 0 || row[j] >= key_blocks) {
        fail(where, ": indices[", i, ", ", j, "] = ", row[j], " is outside the key blocks [0, ", key_blocks, ")");
      }
    }
    std::sort(row.begin(), row.end());
    for (size_t j = 1; j < row.size(); ++j) {
      if (row[j] == row[j - 1]) fail(where, ": indices[", i, "] lists key block ", row[j], " twice");
    }
    if (static_cast<int64_t>(blocks.blocks.block_col_idx.size() + row.size()) > std::numeric_limits<int32_t>::max()) {
      fail(where, ": more than 2^31 - 1 stored blocks do not fit the block form's int32 indices");
    }
    for (const int64_t block : row) {
      blocks.blocks.block_col_idx.push_back(static_cast<int32_t>(block));
      blocks.kind.push_back(sparse_formats::BlockKind::full);
      blocks.partial_slot.push_back(-1);
    }
    blocks.blocks.block_row_ptr.push_back(static_cast<int32_t>(blocks.blocks.block_col_idx.size()));
  }
  return c10::make_intrusive<TorchMask>(Mask::from_blocks(std::move(blocks), where));
}

std::vector<at::Tensor> TorchMask::blocks() const {
  const sparse_formats::BsrMask<int32_t>* b = mask.blocks();
  if (b == nullptr) return {};
  const auto int64_of = [](const std::vector<int32_t>& v) {
    return at::from_blob(const_cast<int32_t*>(v.data()), {static_cast<int64_t>(v.size())}, at::kInt).to(at::kLong);
  };
  at::Tensor partial = at::empty({b->blocks.num_blocks()}, at::kBool);
  bool* is_partial = partial.data_ptr<bool>();
  for (int64_t i = 0; i < b->blocks.num_blocks(); ++i) {
    is_partial[i] = b->kind[static_cast<size_t>(i)] == sparse_formats::BlockKind::partial;
  }
  const int64_t block_m = b->blocks.block_m, block_n = b->blocks.block_n, words = b->words_per_block();
  at::Tensor bits = at::zeros({b->num_partial(), block_m, block_n}, at::kBool);
  bool* out = bits.data_ptr<bool>();
  for (int64_t p = 0; p < b->num_partial(); ++p) {
    for (int64_t e = 0; e < block_m * block_n; ++e) {
      out[p * block_m * block_n + e] = (b->partial_bits[static_cast<size_t>(p * words + e / 64)] >> (e % 64)) & 1u;
    }
  }
  const int64_t size[2] = {block_m, block_n};
  return {as_tensor(size, 2), int64_of(b->blocks.block_row_ptr), int64_of(b->blocks.block_col_idx), partial, bits};
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
