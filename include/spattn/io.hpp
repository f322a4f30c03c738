// The two-level memory of the paper (theory.md section 1), as code.
//
// Slow memory is the caller's arrays, wrapped in SlowMatrix views whose data pointer schedules
// cannot reach. Fast memory is a FastMemory of capacity M words; schedules allocate every buffer
// they compute in from it (so residency is tracked) and move data only with FastMemory::load /
// store (so every word moved is seen). Arithmetic therefore only ever touches fast buffers, and an
// uncounted access is impossible by construction.
//
// The same schedule code runs natively and counted: with a Ledger attached, each move adds to it;
// without one (nullptr) a move is just the packing copy a tiled kernel makes anyway. The capacity
// is enforced in both modes: a schedule that would ever hold more than M words stops with an error
// naming the step and the sizes.
//
// One word is one matrix entry or one index, whatever its type (a float, a double, an int32 index).
//
// Lines. Real memory moves whole lines of L words (64 bytes = 16 fp32 words on CPUs; a GPU's
// 32-byte sector is the same model with L = 8). Beside the words, the ledger counts the lines each
// move touches, by one stated rule (docs/io_model.md, "The line model"): an array is stored as rows
// along its unit stride, and every stored row begins on a line; a move touches, in each stored row
// it reads or writes, the lines its run of words spans. A vector (one column with unit row
// stride, or one row) is one stored row. A view with no unit stride moves one line per word. For
// an array whose row length is a multiple of L on a line-aligned base (d = 64, n = 512), the rule
// is the hardware's line count; otherwise it is the count with each row padded to whole lines.
// Lines are counted per move: a line two moves touch is counted twice, as a word two moves read is
// (the model's fast memory holds the moved words, not the rest of their lines).
//
// An input may also live in slow memory as CSR (a sparse Q, K or V; docs/sparse.md, "Sparse
// inputs"): a SlowMatrix made by SlowMatrix::csr. Loading a tile of it scatters the tile's stored
// entries into the dense fast buffer (zeros elsewhere), so the arithmetic is exactly that of the
// densified matrix, and counts what a CSR reader has to read (io::csr_tile_words): the tile's
// nonzeros as value words, and its row pointers, column indices, search probes and stop words as
// index words, both booked to the load's operand.
#pragma once

#include <spattn/elements.hpp>
#include <spattn/error.hpp>

#include <sparse_formats/csr.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

namespace spattn::io {

// What a moved word belongs to. Index words (mask structure) are kept apart from value words.
enum class Operand : uint8_t {
  q, k, v, o, lse, d_o, delta, dq, dk, dv,  // attention operands; delta is D = rowsum(dO ∘ O)
  s, p, dp, ds,                              // the n x n intermediates (small_cache materializes)
  row_max, row_sum,                          // per-row statistics written between passes
  a1, a2, a3, e, x, y, g,                    // the paper's own task (theory.md section 2)
  mask,                                      // mask structure (index words) and in-block bits
  other,
};
inline constexpr int kNumOperands = static_cast<int>(Operand::other) + 1;
const char* operand_name(Operand operand);

// 16 fp32 words: a 64-byte line.
inline constexpr int64_t kDefaultLineWords = 16;
// A 64-byte line in elements of `type`: 16 fp32 or 32 fp16 / bf16 elements.
inline constexpr int64_t line_words_of(ElementType type) {
  return type == ElementType::fp32 ? kDefaultLineWords : 2 * kDefaultLineWords;
}

// The lines a run of `words` consecutive words from word `offset` of a stored row touches
// (0 when words is 0). offset, words >= 0, line_words >= 1.
inline int64_t segment_lines(int64_t offset, int64_t words, int64_t line_words) {
  if (words <= 0) return 0;
  return (offset + words - 1) / line_words - offset / line_words + 1;
}

// The lines a row of `total` words costs when moved in consecutive chunks of `chunk` words (the
// last one shorter), summed over the chunks: the row's own lines plus one for every chunk boundary
// inside a line. O(1); 0 when total is 0. chunk, line_words >= 1.
int64_t chunked_lines(int64_t total, int64_t chunk, int64_t line_words);

// Throws InvalidArgument naming `where` unless line_words >= 1.
void check_line_words(const char* where, int64_t line_words);

// The largest line the planner takes: 1024 words (4 KiB of fp32, a page).
inline constexpr int64_t kMaxLineWords = 1024;

// A line size the planner takes: a power of two from 1 to kMaxLineWords.
inline constexpr bool is_plan_line_words(int64_t line_words) {
  return line_words >= 1 && line_words <= kMaxLineWords && (line_words & (line_words - 1)) == 0;
}

// The line size a plan is made for (AttentionOptions::line_words): `requested` when > 0, else the
// ledger's when one is given, else `otherwise` (a 64-byte line of the call's elements,
// line_words_of). InvalidArgument naming `where` and the value unless it is a power of two from 1
// to kMaxLineWords, or when a ledger counts lines of another size.
class Ledger;
int64_t plan_line_words(const char* where, int64_t requested, const Ledger* ledger,
                        int64_t otherwise = kDefaultLineWords);

// Which way the stored rows of a dense view of `view_cols` columns run, its element (r, c) at word
// r * row_stride + c * col_stride of its array: along the unit stride; a one-column view with unit
// row stride is one stored row (a vector); a view with no unit stride has none.
enum class StoredAlong : uint8_t { cols, rows, neither };
inline StoredAlong stored_along(int64_t row_stride, int64_t col_stride, int64_t view_cols) {
  const bool column_vector = view_cols == 1 && row_stride == 1;
  if (col_stride == 1 && !column_vector) return StoredAlong::cols;
  return row_stride == 1 ? StoredAlong::rows : StoredAlong::neither;
}

// The rule: the lines a move of the rows x cols tile at (row0, col0) of that view touches, the
// lines each stored row's run spans; a view with no unit stride moves one line per word.

inline int64_t tile_lines(int64_t row_stride, int64_t col_stride, int64_t view_cols, int64_t row0,
                          int64_t col0, int64_t rows, int64_t cols, int64_t line_words) {
  if (rows <= 0 || cols <= 0) return 0;
  switch (stored_along(row_stride, col_stride, view_cols)) {
    case StoredAlong::cols: return rows * segment_lines(col0, cols, line_words);
    case StoredAlong::rows: return cols * segment_lines(row0, rows, line_words);
    case StoredAlong::neither: break;
  }
  return rows * cols;
}

// tile_lines for a move that continues the one before it along the stored rows: the same stored
// rows, starting on the word after the last one that move touched in each. That move's last line
// is then this move's first wherever the stored row's run starts inside a line; a schedule that
// keeps that line in fast memory (a line carry, its words counted there) does not move it again.
// Summed over consecutive moves that cover a run, the lines are the run's own.
inline int64_t continued_tile_lines(int64_t row_stride, int64_t col_stride, int64_t view_cols, int64_t row0,
                                    int64_t col0, int64_t rows, int64_t cols, int64_t line_words) {
  const int64_t lines = tile_lines(row_stride, col_stride, view_cols, row0, col0, rows, cols, line_words);
  if (lines == 0) return 0;
  switch (stored_along(row_stride, col_stride, view_cols)) {
    case StoredAlong::cols: return lines - (col0 % line_words != 0 ? rows : 0);
    case StoredAlong::rows: return lines - (row0 % line_words != 0 ? cols : 0);
    case StoredAlong::neither: break;  // a line per word, none shared
  }
  return lines;
}

// tile_lines summed over the grid of tile_rows x tile_cols tiles (the last ones shorter) that
// covers a whole view_rows x view_cols view, in O(1): what moving every tile once costs.
int64_t grid_lines(int64_t row_stride, int64_t col_stride, int64_t view_rows, int64_t view_cols,
                   int64_t tile_rows, int64_t tile_cols, int64_t line_words);

enum class WordKind : uint8_t { value, index };

struct Traffic {
  int64_t reads = 0;
  int64_t writes = 0;
  int64_t total() const { return reads + writes; }
  Traffic& operator+=(const Traffic& other) {
    reads += other.reads;
    writes += other.writes;
    return *this;
  }
};

// Counts every word read (slow -> fast) and written (fast -> slow), per operand and kind, the
// lines of line_words() words those moves touch (the rule above), and the peak number of words
// resident in fast memory.
class Ledger {
 public:
  // line_words: L, the words of one line (>= 1; InvalidArgument otherwise). L = 1 counts words.
  explicit Ledger(int64_t line_words = kDefaultLineWords);

  void add_read(Operand operand, WordKind kind, int64_t words) { at(operand, kind).reads += words; }
  void add_write(Operand operand, WordKind kind, int64_t words) { at(operand, kind).writes += words; }
  void add_read_lines(Operand operand, WordKind kind, int64_t lines) {
    lines_at(operand, kind).reads += lines;
  }
  void add_write_lines(Operand operand, WordKind kind, int64_t lines) {
    lines_at(operand, kind).writes += lines;
  }
  int64_t line_words() const { return line_words_; }
  void note_resident(int64_t words) { peak_resident_ = words > peak_resident_ ? words : peak_resident_; }

  const Traffic& traffic(Operand operand, WordKind kind) const {
    return traffic_[static_cast<int>(operand)][static_cast<int>(kind)];
  }
  Traffic total() const;                 // all operands, values and indices
  Traffic total(WordKind kind) const;    // all operands, one kind
  int64_t reads() const { return total().reads; }
  int64_t writes() const { return total().writes; }
  int64_t peak_resident() const { return peak_resident_; }

  // The same in lines.
  const Traffic& lines(Operand operand, WordKind kind) const {
    return lines_[static_cast<int>(operand)][static_cast<int>(kind)];
  }
  Traffic total_lines() const;
  Traffic total_lines(WordKind kind) const;

  // Adds another ledger's counts (e.g. one per head or per thread); the peak is the larger one,
  // since each fast memory is separate. Both must count lines of the same size (InvalidArgument).
  Ledger& operator+=(const Ledger& other);
  // A small table: one line per operand that moved anything (words and lines), then the totals
  // and the peak.
  std::string report() const;

 private:
  Traffic& at(Operand operand, WordKind kind) {
    return traffic_[static_cast<int>(operand)][static_cast<int>(kind)];
  }
  Traffic& lines_at(Operand operand, WordKind kind) {
    return lines_[static_cast<int>(operand)][static_cast<int>(kind)];
  }
  int64_t line_words_;
  std::array<std::array<Traffic, 2>, kNumOperands> traffic_{};
  std::array<std::array<Traffic, 2>, kNumOperands> lines_{};
  int64_t peak_resident_ = 0;
};

class FastMemory;

// ---- CSR inputs ---------------------------------------------------------------------------------
//
// The words one load of a CSR tile moves. The tile is stored rows [row0, row0 + rows) by stored
// columns [col0, col0 + cols) (a transposed view loads the same stored tile), rows, cols >= 1:
//   values   the tile's stored entries (explicit zeros included: they are stored)
//   indices  rows + 1 row pointers (row_ptr[row0 .. row0 + rows], one contiguous read), and per
//            row of length L:
//            - when col0 > 0, a binary search for the first column >= col0 over the row's L column
//              indices: ceil(log2 L) + 1 probes when L > 0, 0 when L = 0 (a branch-free search,
//              so the probe count depends on L only); every probe is a counted index word;
//            - the column index of each entry from there on up to the tile's end, and one more
//              (the stop word) when the row has an entry at or past col0 + cols.
//            A full-width tile (col0 = 0, cols = all) therefore reads rows + 1 + its nnz indices.
// An empty tile (rows or cols 0) moves nothing. In lines (the line rule above): the row pointers'
// run, and per stored row the run of column-index positions it reads (from its first probe or
// scanned index to its last) and the run of values it reads.
struct CsrTileWords {
  int64_t values = 0;
  int64_t indices = 0;
  int64_t value_lines = 0;
  int64_t index_lines = 0;
  CsrTileWords& operator+=(const CsrTileWords& other) {
    values += other.values;
    indices += other.indices;
    value_lines += other.value_lines;
    index_lines += other.index_lines;
    return *this;
  }
};

// The probes of the branch-free binary search over a row of `length` column indices.
int64_t csr_search_probes(int64_t length);

// The count above, computed from the CSR structure with std::lower_bound (independently of the
// loader, which counts as it reads). The predictions of every schedule sum it over the tiles the
// schedule loads. The view must be a valid CSR (sparse_formats::validate) and the tile in range.
template <typename Value>
CsrTileWords csr_tile_words(const sparse_formats::CsrMatrixView<int64_t, Value>& csr, int64_t row0,
                            int64_t rows, int64_t col0, int64_t cols, int64_t line_words = kDefaultLineWords);

// How a float view's elements are stored: as floats (native; every view of another type is), or
// as 16-bit elements (spattn/elements.hpp) that loads widen to float and stores round to nearest
// even. Schedules compute in float either way; a word is one element of what is stored.
enum class Storage : uint8_t { native, fp16, bf16 };

// Array conversions between 16-bit storage and float, vectorized where the CPU allows (F16C for
// fp16); elementwise, so the bits never depend on how a run is split. `stride` is the 16-bit
// array's step in elements; the float side is contiguous. storage is fp16 or bf16.
void widen_16bit(Storage storage, const uint16_t* in, int64_t stride, int64_t count, float* out);
void narrow_16bit(Storage storage, const float* in, int64_t count, uint16_t* out, int64_t stride);

template <typename H>
inline constexpr Storage storage_of = std::is_same_v<H, half_t> ? Storage::fp16 : Storage::bf16;

// A view of a rows x cols matrix in slow memory, element (r, c) at data[r * row_stride +
// c * col_stride], or (read-only inputs) a CSR matrix. Only FastMemory reads or writes through it.
template <typename T>
class SlowMatrix {
 public:
  using Value = std::remove_const_t<T>;
  using Csr = sparse_formats::CsrMatrixView<int64_t, Value>;

  SlowMatrix() = default;
  SlowMatrix(T* data, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride = 1)
      : data_(data), rows_(rows), cols_(cols), row_stride_(row_stride), col_stride_(col_stride) {}
  // A float view of 16-bit elements (half_t or bfloat16_t; Storage above).
  template <typename H, std::enable_if_t<is_16bit_element_v<std::remove_const_t<H>> && std::is_same_v<Value, float> &&
                                             (std::is_const_v<T> || !std::is_const_v<H>),
                                         int> = 0>
  SlowMatrix(H* data, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride = 1)
      : bits_(reinterpret_cast<Bits*>(data)), storage_(storage_of<std::remove_const_t<H>>), rows_(rows), cols_(cols),
        row_stride_(row_stride), col_stride_(col_stride) {}
  // A dense row-major rows x cols array.
  static SlowMatrix dense(T* data, int64_t rows, int64_t cols) {
    return SlowMatrix(data, rows, cols, cols, 1);
  }
  // A CSR matrix (trusted: validate data from outside first). Read-only: a schedule may load from
  // it, never store to it. The view's arrays must outlive every use.
  template <typename U = T, typename = std::enable_if_t<std::is_const_v<U>>>
  static SlowMatrix csr(const Csr& matrix) {
    SlowMatrix view;
    view.rows_ = matrix.num_rows();
    view.cols_ = matrix.num_cols();
    view.is_csr_ = true;
    view.csr_ = matrix;
    return view;
  }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool is_csr() const { return is_csr_; }
  Storage storage() const { return storage_; }
  // The CSR structure (meaningful when is_csr(); the predictions walk it, they never load it).
  const Csr& csr_matrix() const { return csr_; }
  bool csr_transposed() const { return csr_transposed_; }
  // The lines a move of the rows x cols tile at (row0, col0) touches (tile_lines). Dense views.
  int64_t tile_lines(int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t line_words) const {
    return io::tile_lines(row_stride_, col_stride_, cols_, row0, col0, rows, cols, line_words);
  }
  // The same for a move that continues the one before along the stored rows (continued_tile_lines).
  int64_t continued_tile_lines(int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t line_words) const {
    return io::continued_tile_lines(row_stride_, col_stride_, cols_, row0, col0, rows, cols, line_words);
  }
  // Which way a dense view's stored rows run, as tile_lines reads it (io::stored_along).
  StoredAlong stored_along() const { return io::stored_along(row_stride_, col_stride_, cols_); }
  // The transpose, as a view of the same words (no data moves).
  SlowMatrix transposed() const {
    SlowMatrix view = *this;
    view.rows_ = cols_;
    view.cols_ = rows_;
    view.row_stride_ = col_stride_;
    view.col_stride_ = row_stride_;
    view.csr_transposed_ = !csr_transposed_;
    return view;
  }

 private:
  friend class FastMemory;
  using Bits = std::conditional_t<std::is_const_v<T>, const uint16_t, uint16_t>;
  T* data_ = nullptr;     // native storage
  Bits* bits_ = nullptr;  // 16-bit storage
  Storage storage_ = Storage::native;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t row_stride_ = 0;
  int64_t col_stride_ = 1;
  bool is_csr_ = false;
  bool csr_transposed_ = false;  // the view is the transpose of the stored CSR
  Csr csr_;
};

// Fast buffers start on a 64-byte boundary, a cache line of the CPUs the kernels target, so a
// tile of w words spans ceil(w / 16) lines of fp32 words in a real cache, as the line model
// assumes, and not one more where it straddles a boundary (docs/io_model.md, "The line model").
inline constexpr std::size_t kFastBufferAlignment = 64;

namespace detail {
struct LineAlignedDelete {
  template <typename T>
  void operator()(T* p) const {
    ::operator delete[](p, std::align_val_t{kFastBufferAlignment});
  }
};
}  // namespace detail

// A buffer in fast memory: `words` entries of T that count towards the capacity while it lives.
// Schedules allocate their buffers once, outside their loops.
template <typename T>
class FastBuffer {
 public:
  FastBuffer() = default;
  FastBuffer(FastBuffer&& other) noexcept { *this = std::move(other); }
  FastBuffer& operator=(FastBuffer&& other) noexcept;
  FastBuffer(const FastBuffer&) = delete;
  FastBuffer& operator=(const FastBuffer&) = delete;
  ~FastBuffer() { release(); }

  T* data() { return storage_.get(); }
  const T* data() const { return storage_.get(); }
  T& operator[](int64_t i) { return storage_[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return storage_[static_cast<size_t>(i)]; }
  int64_t words() const { return words_; }

 private:
  friend class FastMemory;
  void release();
  std::unique_ptr<T[], detail::LineAlignedDelete> storage_;
  int64_t words_ = 0;
  FastMemory* owner_ = nullptr;
};

// A fast memory of `capacity_words` words. `schedule` names the algorithm in error messages.
// With ledger == nullptr it runs natively (moves are plain copies, nothing is counted).
class FastMemory {
 public:
  FastMemory(int64_t capacity_words, Ledger* ledger, std::string schedule);
  FastMemory(const FastMemory&) = delete;
  FastMemory& operator=(const FastMemory&) = delete;
  ~FastMemory();

  int64_t capacity() const { return capacity_; }
  int64_t resident() const { return resident_; }
  // The line size moves are counted in: the ledger's (kDefaultLineWords natively).
  int64_t line_words() const { return ledger_ != nullptr ? ledger_->line_words() : kDefaultLineWords; }
  bool counted() const { return ledger_ != nullptr; }
  const std::string& schedule() const { return schedule_; }

  // Reserves `words` entries; throws RuntimeError naming the schedule, `what`, the sizes and M
  // when the resident words would exceed the capacity.
  template <typename T>
  FastBuffer<T> allocate(int64_t words, const char* what);

  // Copies the rows x cols tile of `src` at (row0, col0) into `dst` (row-major, leading dimension
  // dst_ld, starting at dst_offset) and counts rows * cols reads of `operand`. A CSR `src`
  // scatters the tile's entries into the zeroed tile and counts csr_tile_words of the stored tile
  // as `operand`'s value and index reads (`kind` is ignored then).
  template <typename S, typename T>
  void load(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows,
            int64_t cols, FastBuffer<T>& dst, int64_t dst_offset, int64_t dst_ld,
            WordKind kind = WordKind::value);
  // load() of a tile that continues the previous load of the same stored rows along them, the
  // line they share held in fast memory by the caller (a line carry): the lines counted are
  // continued_tile_lines'. A CSR `src` is load()ed as it is (its moves have no carry).
  template <typename S, typename T>
  void load_continued(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows,
                      int64_t cols, FastBuffer<T>& dst, int64_t dst_offset, int64_t dst_ld,
                      WordKind kind = WordKind::value);
  // load()'s count, and where the kernel may read the tile: `src` itself when its rows already lie
  // as the buffer would hold them (not CSR, element type T, unit column stride, row stride
  // dst_ld), else dst (from dst_offset) after load(). The values are the same either way, so no
  // result depends on which; dst stays allocated (in the model the words are resident). Natively
  // the tile is then read in place, as from a hardware cache, instead of copied first (the copies
  // of the streamed tiles were a fifth of a sliding window's flash forward and backward at d 64).
  template <typename S, typename T>
  const T* read_tile(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows,
                     int64_t cols, FastBuffer<T>& dst, int64_t dst_offset, int64_t dst_ld,
                     WordKind kind = WordKind::value);
  // A run of `count` consecutive elements [begin, begin + count) of a column vector (a dense
  // view of one column with unit row stride): load(operand, src, begin, 0, count, 1, dst,
  // dst_offset, 1, kind), small enough to inline (the density-adaptive schedule moves its index
  // words and entry values in runs of a few words).
  template <typename S, typename T>
  void load_run(Operand operand, const SlowMatrix<S>& src, int64_t begin, int64_t count, FastBuffer<T>& dst,
                int64_t dst_offset, WordKind kind = WordKind::value);
  // The same run stored: store(operand, src, src_offset, 1, dst, begin, 0, count, 1, kind).
  template <typename T, typename S>
  void store_run(Operand operand, const FastBuffer<T>& src, int64_t src_offset, const SlowMatrix<S>& dst,
                 int64_t begin, int64_t count, WordKind kind = WordKind::value);
  // One element: load(operand, src, row, col, 1, 1, dst, dst_offset, 1, kind), small enough to
  // inline.
  template <typename S, typename T>
  void load_word(Operand operand, const SlowMatrix<S>& src, int64_t row, int64_t col, FastBuffer<T>& dst,
                 int64_t dst_offset, WordKind kind = WordKind::value);
  // One element: store(operand, src, src_offset, 1, dst, row, col, 1, 1, kind).
  template <typename T, typename S>
  void store_word(Operand operand, const FastBuffer<T>& src, int64_t src_offset, const SlowMatrix<S>& dst,
                  int64_t row, int64_t col, WordKind kind = WordKind::value);
  // Copies a rows x cols tile of `src` (row-major, leading dimension src_ld, from src_offset) to
  // `dst` at (row0, col0) and counts rows * cols writes of `operand`.
  template <typename T, typename S>
  void store(Operand operand, const FastBuffer<T>& src, int64_t src_offset, int64_t src_ld,
             const SlowMatrix<S>& dst, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
             WordKind kind = WordKind::value);

 private:
  template <typename T>
  friend class FastBuffer;
  void release(int64_t words) { resident_ -= words; }
  void count_read(Operand operand, WordKind kind, int64_t words, int64_t lines) {
    if (ledger_ == nullptr) return;
    ledger_->add_read(operand, kind, words);
    ledger_->add_read_lines(operand, kind, lines);
  }
  void count_write(Operand operand, WordKind kind, int64_t words, int64_t lines) {
    if (ledger_ == nullptr) return;
    ledger_->add_write(operand, kind, words);
    ledger_->add_write_lines(operand, kind, lines);
  }
  // load() and load_continued(): `continued` selects the line count of a dense `src`.
  template <typename S, typename T>
  void load_tile(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                 FastBuffer<T>& dst, int64_t dst_offset, int64_t dst_ld, WordKind kind, bool continued);
  template <typename S, typename T>
  void load_csr(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows,
                int64_t cols, T* out, int64_t dst_ld);

  int64_t capacity_;
  int64_t resident_ = 0;
  Ledger* ledger_;
  std::string schedule_;
};

}  // namespace spattn::io

#include <spattn/io_inline.hpp>
