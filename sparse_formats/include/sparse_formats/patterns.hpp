// Attention mask generators: the standard sparse-attention patterns, built directly in CSR.
//
// Every generator returns the seqlen_q x seqlen_k pattern of pairs (i, j) where query i may attend
// key j. Rows are built one after another in O(nnz + seqlen_q) time and exactly nnz memory; no
// seqlen_q x seqlen_k grid is ever formed, so a 128k-token window mask costs what it stores. BSR
// forms come from csr_to_bsr_mask (convert.hpp). Random patterns are deterministic given the seed:
// they use a splitmix64 generator implemented here, never <random>'s distributions (which differ
// between standard libraries); see docs/patterns.md, "Determinism".
//
// Rectangular masks (seqlen_q != seqlen_k) are bottom-right aligned, as in FlashAttention 2.1+:
// query i sits at key position
//     pos(i) = i + (seqlen_k - seqlen_q),
// so the last query lines up with the last key (decoding with a KV cache). Every position-based
// definition below uses pos(i); for a square mask pos(i) = i. When seqlen_q > seqlen_k the first
// queries have pos(i) < 0 and a causal pattern leaves their rows empty (fully masked rows).
//
// Errors: FormatError with the pattern's name, the parameter and its value, e.g.
// "sliding_window: w = -3 must be >= 0". A shape is valid when both extents are >= 0 and fit the
// index type; a pattern whose nnz does not fit the index type is refused before anything is
// allocated ("use the int64_t variant"). docs/patterns.md has the same definitions with pictures.
//
// Each generator is a template over the index type, instantiated for int32_t (MaskIndex, the
// default) and int64_t: `causal_pattern(n, n)` or `causal_pattern<int64_t>(n, n)`.
#pragma once

#include <sparse_formats/csr.hpp>
#include <sparse_formats/error.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sparse_formats {

// ---- dense and causal --------------------------------------------------------------------------
// Every pair attends.
template <typename Index = MaskIndex>
CsrPattern<Index> full_pattern(int64_t seqlen_q, int64_t seqlen_k);

// Autoregressive mask: j <= pos(i), i.e. j <= i + (seqlen_k - seqlen_q) (bottom-right aligned).
template <typename Index = MaskIndex>
CsrPattern<Index> causal_pattern(int64_t seqlen_q, int64_t seqlen_k);

// ---- local windows -----------------------------------------------------------------------------
// Sliding window of w keys on each side (Beltagy et al. 2020, Longformer; FlashAttention's
// window_size = (w, w), or (w, 0) when causal):
//   symmetric:  |pos(i) - j| <= w          (at most 2w + 1 keys per row)
//   causal:     0 <= pos(i) - j <= w       (at most w + 1 keys per row)
// w >= 0; w = 0 is the diagonal.
template <typename Index = MaskIndex>
CsrPattern<Index> sliding_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w,
                                         bool causal = false);

// Dilated sliding window (Longformer): w neighbours on each side spaced `dilation` apart:
//   symmetric:  (pos(i) - j) % dilation == 0  and  |pos(i) - j| <= w * dilation
//   causal:     (pos(i) - j) % dilation == 0  and  0 <= pos(i) - j <= w * dilation
// w >= 0, dilation >= 1; dilation = 1 is sliding_window.
template <typename Index = MaskIndex>
CsrPattern<Index> dilated_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w,
                                         int64_t dilation, bool causal = false);

// Sliding window plus global tokens (Longformer): keys 0..g-1 are attended by every query, and the
// queries at positions 0..g-1 attend every key:
//   symmetric:  j < g  or  0 <= pos(i) < g  or  |pos(i) - j| <= w
//   causal:     j <= pos(i)  and  (j < g  or  pos(i) - j <= w)
// (a causal global query then sees only its prefix, which lies inside the global keys).
// w >= 0, g >= 0; g may exceed seqlen_k (then everything is global).
template <typename Index = MaskIndex>
CsrPattern<Index> global_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t g,
                                        bool causal = false);

// ---- Sparse Transformer (Child et al. 2019, "Generating Long Sequences with Sparse Transformers")
// Strided: the previous `stride` keys plus every stride-th key before them:
//   causal:     0 <= pos(i) - j  and  (pos(i) - j < stride  or  (pos(i) - j) % stride == 0)
//   symmetric:  |pos(i) - j| < stride  or  (pos(i) - j) % stride == 0
// stride >= 1. The paper's pattern is causal (the default).
template <typename Index = MaskIndex>
CsrPattern<Index> strided_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t stride,
                                  bool causal = true);

// Fixed: the query's own stride-block plus the last c "summary" keys of every stride-block:
//   symmetric:  floor(j / stride) == floor(pos(i) / stride)  or  j % stride >= stride - c
//   causal:     the same, and j <= pos(i)
// stride >= 1, 0 <= c <= stride (floor division, so negative positions form their own blocks).
template <typename Index = MaskIndex>
CsrPattern<Index> fixed_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, int64_t c,
                                bool causal = true);

// ---- BigBird (Zaheer et al. 2020, "Big Bird: Transformers for Longer Sequences"), block level --
// Keys are cut into blocks of `block` (key block J = floor(j / block), the last one may be short)
// and each query into the block of its position (I = floor(pos(i) / block); for a square mask the
// query blocks are the BSR block rows). Query block I attends key block J when
//   window:  |I - J| <= w
//   global:  J < g (everyone attends the global blocks), or 0 <= I < g (global rows attend all)
//   random:  J is one of r blocks drawn uniformly without replacement, per query block, from the
//            key blocks that are neither window nor global (all of them if fewer than r remain);
//            the draw depends only on (seed, I).
// Every element of an attended block attends. ITC defaults of the paper: block 64, w 1, g 2, r 3.
struct BigBirdParams {
  int64_t block = 64;  // block size in elements (rows and columns), >= 1
  int64_t w = 1;       // window blocks on each side, >= 0
  int64_t g = 2;       // global blocks, >= 0
  int64_t r = 3;       // random blocks per query block, >= 0
  uint64_t seed = 0;
};
template <typename Index = MaskIndex>
CsrPattern<Index> bigbird_pattern(int64_t seqlen_q, int64_t seqlen_k, const BigBirdParams& params);

// ---- packed documents and prefix LM ------------------------------------------------------------
// Block-diagonal documents (packed variable-length batches, FlashAttention's varlen / cu_seqlens):
// document d holds queries [Q_d, Q_d + lengths[d]) and keys [K_d, K_d + lengths_k[d]), where Q_d,
// K_d are the prefix sums. A query attends the keys of its own document only; when causal, within
// each document bottom-right aligned: local key b <= local query a + (lengths_k[d] - lengths[d]).
// lengths_k empty means lengths_k = lengths (the square case; a rectangular mask needs lengths_k).
// Lengths are >= 0 (empty documents are allowed) and must sum to seqlen_q (lengths) and seqlen_k
// (lengths_k); both lists must name the same number of documents.
template <typename Index = MaskIndex>
CsrPattern<Index> documents_pattern(int64_t seqlen_q, int64_t seqlen_k,
                                    const std::vector<int64_t>& lengths,
                                    const std::vector<int64_t>& lengths_k = {},
                                    bool causal = false);
// `total` split into `num_docs` lengths that differ by at most one, the longer ones last
// (document d ends at floor((d + 1) * total / num_docs)). total >= 0, num_docs >= 1.
std::vector<int64_t> even_lengths(int64_t total, int64_t num_docs);

// Prefix LM (Raffel et al. 2020, T5; Dong et al. 2019, UniLM): the first p keys are visible to
// every query (the prefix is bidirectional), the rest causally: j < p  or  j <= pos(i).
// p >= 0; p >= seqlen_k makes the mask full.
template <typename Index = MaskIndex>
CsrPattern<Index> prefix_lm_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t p);

// ---- random ------------------------------------------------------------------------------------
// Each pair (i, j) attends independently with probability p (restricted to j <= pos(i) when
// causal). Built by geometric skipping in O(nnz + seqlen_q), one random stream per row derived
// from (seed, i). The "unstructured" mask of the I/O lower bound. 0 <= p <= 1.
template <typename Index = MaskIndex>
CsrPattern<Index> random_pattern(int64_t seqlen_q, int64_t seqlen_k, double p, uint64_t seed,
                                 bool causal = false);

// Random blocks: the grid of block_m x block_n blocks aligned to (0, 0) (the BSR grid, edge blocks
// clipped); each block is kept independently with probability p (one stream per block row), and
// every element of a kept block attends. 0 <= p <= 1, block sizes >= 1.
template <typename Index = MaskIndex>
CsrPattern<Index> random_blocks_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t block_m,
                                        int64_t block_n, double p, uint64_t seed);

// ---- composition -------------------------------------------------------------------------------
// Union / intersection of two patterns of the same shape (else FormatError naming both shapes),
// merged row by row in O(nnz(a) + nnz(b)). E.g. intersect with causal_pattern to make any
// pattern causal.
template <typename Index>
CsrPattern<Index> pattern_union(const CsrPatternView<Index>& a, const CsrPatternView<Index>& b);
template <typename Index>
CsrPattern<Index> pattern_intersection(const CsrPatternView<Index>& a,
                                       const CsrPatternView<Index>& b);

// ---- terminal pictures -------------------------------------------------------------------------
// The side of the square cells render_mask_blocks uses: the smallest that fits both extents into
// max_width cells (1 when the mask is small enough to draw element by element).
int64_t render_cell_size(int64_t num_rows, int64_t num_cols, int64_t max_width = 64);
// One line per row of cells, each cell '#' (every in-range element attends), '+' (some do) or
// '.' (none), each line ending in '\n'; "" for an empty shape. max_width >= 1. O(nnz + picture).
template <typename Index>
std::string render_mask_blocks(const CsrPatternView<Index>& mask, int64_t max_width = 64);

// ---- PATTERN-SPEC: patterns by name, for the CLI and the benchmarks ----------------------------
// Grammar (whitespace between tokens is ignored):
//   spec    := union
//   union   := inter { '|' inter }             pattern union
//   inter   := primary { '&' primary }         pattern intersection ('&' binds tighter than '|')
//   primary := '(' union ')' | pattern
//   pattern := name [ ':' key '=' value { ',' key '=' value } ]
//   name, key: [a-z0-9_]+    value: any run of characters other than , | & ( ) and whitespace;
//   lists use '/' (lengths=100/200/300); booleans are 0, 1, false or true.
// Examples: "causal", "sliding_window:w=128,causal=1", "bigbird:w=3,g=2,r=3,block=64,seed=7",
//           "random:p=0.05,seed=1", "documents:lengths=100/200/300,causal=1",
//           "bigbird:block=16 & causal", "sliding_window:w=64 | random:p=0.01".
struct PatternSpec {
  // A pattern name, or "union" / "intersection" for a composition of `operands`.
  std::string name;
  std::map<std::string, std::string> params;  // key -> value text, as written (leaves only)
  std::vector<PatternSpec> operands;          // compositions only, in order

  bool is_composite() const { return name == "union" || name == "intersection"; }
  friend bool operator==(const PatternSpec& a, const PatternSpec& b) {
    return a.name == b.name && a.params == b.params && a.operands == b.operands;
  }
  friend bool operator!=(const PatternSpec& a, const PatternSpec& b) { return !(a == b); }
};

struct PatternParamInfo {
  std::string key;
  std::string type;           // "int", "uint64", "bool", "real" or "int list"
  std::string default_value;  // "" when absent by default (the meaning says what applies then)
  std::string meaning;
};

struct PatternInfo {
  std::string name;
  std::string description;  // one line
  std::string reference;    // paper or system it comes from
  std::string example;      // a spec that parses
  std::vector<PatternParamInfo> params;
};

// Parses a spec; throws FormatError quoting the spec and naming the problem: syntax (with the
// character position), unknown pattern (listing the valid names), unknown or duplicate key
// (listing the valid keys), or a value that is not of the key's type. Value ranges (w >= 0) are
// checked by make_pattern.
PatternSpec parse_pattern_spec(const std::string& text);
// The canonical text of a spec (keys sorted, nested compositions parenthesized);
// parse_pattern_spec(format_pattern_spec(s)) == s.
std::string format_pattern_spec(const PatternSpec& spec);
// The spec with every parameter that has a default written out (for reproducible labels).
PatternSpec with_defaults(const PatternSpec& spec);
// Builds the mask a spec describes. Checks the spec as parse_pattern_spec does (specs can be built
// by hand), then the values as the generators do.
template <typename Index = MaskIndex>
CsrPattern<Index> make_pattern(const PatternSpec& spec, int64_t seqlen_q, int64_t seqlen_k);
// Every pattern name with its parameters, defaults, meaning and reference, sorted by name.
// The blocks a block pattern's pairs come in (bigbird: block x block; random_blocks: block_m x
// block_n), or nullopt for every other spec, compositions included. Checks the leaf as
// make_pattern does.
std::optional<std::pair<int64_t, int64_t>> block_pattern_size(const PatternSpec& spec);

std::vector<PatternInfo> list_patterns();
// A few lines describing the spec syntax, for --help texts.
std::string pattern_spec_syntax();

}  // namespace sparse_formats
