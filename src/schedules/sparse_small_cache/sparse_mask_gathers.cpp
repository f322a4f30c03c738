// What the transposed sweeps gather from a value array in CSR order (SparseMaskCounts::gathers,
// sparse_mask_counts.hpp): segment by segment for a mask counted by its entries, and in closed
// form per run of consecutive keys when the runs are kept, so that an interval or block mask
// costs O(runs) per block size, not O(entries).
//
// The rule both count: a segment is a query row's consecutive positions [begin, end) in one key
// block. Key block b's walk meets its segments in CSR order and loads the pieces of `run`
// positions (cut at multiples of run) from begin / run to (end - 1) / run, all but the first when
// that piece is the one it loaded last (the piece holding its previous segment's last position).
#include "schedules/sparse_small_cache/sparse_mask_counts.hpp"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace spattn::schedules {

SparseMaskCounts::Gathers SparseMaskCounts::gathers(int64_t block_keys, int64_t run) const {
  block_keys = std::max<int64_t>(block_keys, 1);
  run = std::max<int64_t>(run, 1);
  if (run == 1) return {nnz_, nnz_};
  {
    std::lock_guard<std::mutex> lock(memo_mutex_);
    const auto found = gathers_memo_.find({block_keys, run});
    if (found != gathers_memo_.end()) return found->second;
  }
  // One walk counts every power-of-two run up to kGatherRuns at once (the tile choice asks for
  // each of them with the same block); others alone.
  std::vector<int64_t> runs;
  const bool power = (run & (run - 1)) == 0;
  for (int64_t r = 2; power && r <= kGatherRuns; r *= 2) runs.push_back(r);
  if (runs.empty() || runs.back() < run) runs.assign(1, run);
  const std::vector<Gathers> counted =
      uses_runs() ? count_gathers_by_runs(block_keys, runs) : count_gathers_by_entries(block_keys, runs);
  std::lock_guard<std::mutex> lock(memo_mutex_);
  for (size_t i = 0; i < runs.size(); ++i) gathers_memo_.emplace(std::make_pair(block_keys, runs[i]), counted[i]);
  return gathers_memo_.at({block_keys, run});
}

namespace {

// x / d and x % d for x >= 0, by shifts when d is a power of two (every run the planner asks for,
// and then every divisor below): a run's closed form is a handful of these.
class Divisor {
 public:
  explicit Divisor(int64_t d) : d_(d) {
    if ((d & (d - 1)) == 0) {
      while ((int64_t{1} << shift_) < d) ++shift_;
    } else {
      shift_ = -1;
    }
  }
  int64_t value() const { return d_; }
  int64_t quotient(int64_t x) const { return shift_ >= 0 ? x >> shift_ : x / d_; }
  int64_t remainder(int64_t x) const { return shift_ >= 0 ? x & (d_ - 1) : x % d_; }

 private:
  int64_t d_ = 1;
  int shift_ = 0;
};

// The words of piece `piece` of `run` positions: run, but the last piece is clipped at nnz.
int64_t piece_words(int64_t piece, int64_t run, int64_t nnz) { return std::min((piece + 1) * run, nnz) - piece * run; }

}  // namespace

// last_end[b] = one past the last position key block b loaded (-1: none): block b holds piece
// (last_end[b] - 1) / run (floor division; -2 / run holds no piece).
std::vector<SparseMaskCounts::Gathers> SparseMaskCounts::count_gathers_by_entries(
    int64_t block_keys, const std::vector<int64_t>& runs) const {
  const int64_t blocks = (std::max<int64_t>(seqlen_k_, 0) + block_keys - 1) / block_keys;
  std::vector<int64_t> last_end(static_cast<size_t>(blocks), -1);
  std::vector<Gathers> gathers(runs.size());
  std::vector<Divisor> pieces(runs.begin(), runs.end());
  const auto piece_of = [&](int64_t position, size_t r) {
    return position >= 0 ? pieces[r].quotient(position) : -1;  // -1: the held piece of a block that loaded none
  };
  const int64_t m = std::max<int64_t>(seqlen_q_, 0);
  with_columns([&](const auto* columns) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row_end = row_ptr_[i + 1];
      for (int64_t begin = row_ptr_[i]; begin < row_end;) {
        const int64_t block = columns[begin] / block_keys;
        const int64_t block_end = (block + 1) * block_keys;
        int64_t end = begin + 1;
        while (end < row_end && columns[end] < block_end) ++end;
        int64_t& held_end = last_end[static_cast<size_t>(block)];
        for (size_t r = 0; r < runs.size(); ++r) {
          const int64_t first = piece_of(begin, r), final_piece = piece_of(end - 1, r);
          const int64_t from = piece_of(held_end - 1, r) == first ? first + 1 : first;
          if (final_piece >= from) {
            gathers[r].loads += final_piece - from + 1;
            gathers[r].words += (final_piece - from) * runs[r] + piece_words(final_piece, runs[r], nnz_);
          }
        }
        held_end = end;
        begin = end;
      }
    }
  });
  return gathers;
}

namespace {

// a^-1 modulo p, for gcd(a, p) = 1 (extended Euclid).
int64_t inverse_modulo(int64_t a, int64_t p) {
  int64_t old_r = a % p, r = p, old_s = 1, s = 0;
  while (r != 0) {
    const int64_t q = old_r / r;
    old_r -= q * r;
    std::swap(old_r, r);
    old_s -= q * s;
    std::swap(old_s, s);
  }
  return ((old_s % p) + p) % p;
}

// Pieces of `run` positions, and how many of the positions first, first + step, ...,
// first + (count - 1) step (first >= 0) are multiples of run: the cuts between a run's key-block
// segments that fall on a piece boundary (the others split a piece, which both sides then load).
// O(1) a call: t is counted when first + t step = 0 (mod run), i.e. t = t0 (mod run / g),
// g = gcd(step, run).
class RunPieces {
 public:
  RunPieces(int64_t run, int64_t step)
      : run_(run), g_(std::gcd(step % run, run)), period_(run / g_.value()) {
    inverse_ = inverse_modulo((step / g_.value()) % period_.value(), period_.value());
  }
  int64_t run() const { return run_.value(); }
  int64_t of(int64_t position) const { return run_.quotient(position); }
  int64_t aligned(int64_t first, int64_t count) const {
    if (count <= 0 || g_.remainder(run_.remainder(first)) != 0) return 0;
    const int64_t p = period_.value();
    const int64_t t0 = period_.remainder(period_.remainder(p - period_.remainder(g_.quotient(first))) * inverse_);
    return t0 < count ? period_.quotient(count - 1 - t0) + 1 : 0;
  }

 private:
  Divisor run_, g_, period_;
  int64_t inverse_ = 0;
};

}  // namespace

// A run of consecutive keys [key_begin, key_end) at positions [p, p + length) is cut by the key
// blocks into segments j = 0 .. segments - 1 (block first_block + j). The pieces they load:
// - the pieces they span: those of [p, p + length), plus one for each cut between two segments
//   that splits a piece (RunPieces::aligned counts the others), all in closed form;
// - less one for a segment whose block loaded its first piece last. That block's previous
//   segment then ends inside the piece the segment starts in, fewer than `run` positions back;
//   the segments between are other blocks'. Only a segment starting within `widest` (the longest
//   run counted) positions of its run's start can be one (the run's own segments are other
//   blocks), so those "head" segments are counted one by one against `recent`: the segments that
//   end within the last `widest` positions walked, by end.
// The last piece's words are clipped at nnz, so the loads of the last piece are counted apart.
// O(runs x widest) in all.
std::vector<SparseMaskCounts::Gathers> SparseMaskCounts::count_gathers_by_runs(
    int64_t block_keys, const std::vector<int64_t>& runs) const {
  const int64_t widest = *std::max_element(runs.begin(), runs.end());
  std::vector<RunPieces> pieces;
  std::vector<int64_t> last_piece, last_piece_loads(runs.size(), 0);
  for (const int64_t run : runs) {
    pieces.emplace_back(run, block_keys);
    last_piece.push_back(nnz_ > 0 ? (nnz_ - 1) / run : -1);
  }
  const Divisor blocks(block_keys);
  std::vector<Gathers> gathers(runs.size());
  struct Segment {
    int64_t end, block;
  };
  std::vector<Segment> recent;
  // A row with the runs of the two rows before it, at least `widest` positions long and a multiple
  // of it, and ending before the last piece, loads what the row before it did: its pieces are that
  // row's shifted by whole pieces of every run, and the segments it can find held are the row
  // before's (a row that long leaves no older segment in `recent`). It adds that row's counts.
  std::vector<int64_t> row_loads(runs.size());  // the last row walked, per run
  const int64_t m = std::max<int64_t>(seqlen_q_, 0);
  for (int64_t i = 0; i < m; ++i) {
    int64_t p = row_ptr_[i];
    const int64_t row_length = row_ptr_[i + 1] - p;
    if (i >= 2 && repeats_previous_[static_cast<size_t>(i)] && repeats_previous_[static_cast<size_t>(i - 1)] &&
        row_length >= widest && row_length % widest == 0 && row_ptr_[i + 1] <= nnz_ - widest) {
      for (size_t r = 0; r < runs.size(); ++r) gathers[r].loads += row_loads[r];
      for (Segment& segment : recent) segment.end += row_length;
      continue;
    }
    // (kept only for a row the next one repeats: a row that is skipped takes the last row kept)
    const bool repeated_next = i + 1 < m && repeats_previous_[static_cast<size_t>(i + 1)];
    if (repeated_next) {
      for (size_t r = 0; r < runs.size(); ++r) row_loads[r] = gathers[r].loads;
    }
    for (auto k = static_cast<size_t>(run_ptr_[static_cast<size_t>(i)]); k < static_cast<size_t>(run_ptr_[static_cast<size_t>(i) + 1]); ++k) {
      const int64_t key_begin = run_begin_[k], key_end = run_end_[k], length = key_end - key_begin;
      const int64_t first_block = blocks.quotient(key_begin);
      const int64_t segments = blocks.quotient(key_end - 1) - first_block + 1;
      const auto segment_begin = [&](int64_t j) {
        return j == 0 ? p : p + (first_block + j) * block_keys - key_begin;
      };
      const auto segment_end = [&](int64_t j) {
        return j == segments - 1 ? p + length : p + (first_block + j + 1) * block_keys - key_begin;
      };
      int64_t head = 1;
      while (head < segments && segment_begin(head) < p + widest) ++head;
      for (int64_t j = 0; j < head; ++j) {
        const int64_t begin = segment_begin(j), end = segment_end(j), block = first_block + j;
        int64_t held_end = -1;  // the end of the block's latest recent segment
        for (auto s = recent.rbegin(); s != recent.rend(); ++s) {
          if (s->block == block) {
            held_end = s->end;
            break;
          }
        }
        for (size_t r = 0; r < runs.size(); ++r) {
          const int64_t first = pieces[r].of(begin), final_piece = pieces[r].of(end - 1);
          const bool held = held_end > first * runs[r];
          gathers[r].loads += final_piece - first + 1 - (held ? 1 : 0);
          if (final_piece == last_piece[r] && (final_piece > first || !held)) ++last_piece_loads[r];
        }
      }
      if (head < segments) {  // the tail: every piece it spans is loaded
        const int64_t begin = segment_begin(head), end = p + length, tail_cuts = segments - head - 1;
        const int64_t first_cut = tail_cuts > 0 ? segment_begin(head + 1) : 0;
        for (size_t r = 0; r < runs.size(); ++r) {
          gathers[r].loads += pieces[r].of(end - 1) - pieces[r].of(begin) + 1 + tail_cuts -
                              pieces[r].aligned(first_cut, tail_cuts);
          const int64_t last_start = last_piece[r] * runs[r];  // segments ending past it load the last piece
          if (end > last_start) {
            const int64_t from = last_start <= p ? 0 : blocks.quotient(key_begin + last_start - p) - first_block;
            last_piece_loads[r] += segments - std::max(head, from);
          }
        }
      }
      // Keep the segments ending within `widest` positions of the run's end.
      const int64_t horizon = p + length - widest;
      size_t stale = 0;
      while (stale < recent.size() && recent[stale].end <= horizon) ++stale;
      if (stale > 0) recent.erase(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(stale));
      int64_t j = segments;
      while (j > 0 && segment_end(j - 1) > horizon) --j;
      for (; j < segments; ++j) recent.push_back({segment_end(j), first_block + j});
      p += length;
    }
    if (repeated_next) {
      for (size_t r = 0; r < runs.size(); ++r) row_loads[r] = gathers[r].loads - row_loads[r];
    }
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const int64_t clipped = runs[r] - (last_piece[r] >= 0 ? piece_words(last_piece[r], runs[r], nnz_) : runs[r]);
    gathers[r].words = gathers[r].loads * runs[r] - clipped * last_piece_loads[r];
  }
  return gathers;
}

}  // namespace spattn::schedules
