// Pictures through gnuplot (Debian: gnuplot-nox; scripts/install_deps.sh installs it): the I/O
// against M figure of spattn run / sweep --plot (the paper's Figure 1, from our counted runs), and
// a picture of a mask for spattn patterns --png. gnuplot is driven through a temporary data file and
// script; the PNG is written beside its target and renamed into place (all or nothing).
#pragma once

#include "report.hpp"

#include <sparse_formats/csr.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spattn::cli {

// The most panels one --plot figure holds (4 x 4).
inline constexpr size_t kMaxPlotPanels = 16;

// Throws RuntimeError naming `flag` when gnuplot is not on PATH: call it before a long run, so a
// missing gnuplot is reported at once, not after the work.
void require_gnuplot(const std::string& flag);

// I/O against M on log-log axes, one panel per (mask, n, d, pass) of `rows`: flash's and
// small_cache's predicted I/O (lines), the rows' own I/O (points: counted, or predicted when not
// run), the bound's two branches (dashed), the crossover of the two algorithms and the M where the
// bound's branches meet (vertical lines). `curves` are extra predicted rows (same panels) that
// make the lines smooth; they add no points.
void plot_io(const std::vector<Row>& rows, const std::vector<Row>& curves, const std::string& title,
             const std::string& png_path, const std::string& flag);

// The mask as an image: each pixel the fraction of its (query, key) pairs that attend, at most
// 512 x 512 pixels; queries top to bottom, keys left to right.
void plot_mask(const sparse_formats::CsrPatternView<int64_t>& mask, const std::string& title,
               const std::string& png_path, const std::string& flag);

}  // namespace spattn::cli
