// The run-time choice between the flash kernels' instruction sets (flash_kernels.hpp,
// flash_kernels_isa.hpp). The build uses no -march flag (the machines that build and run it
// vary), so the wider sets are compiled in translation units of their own and picked here from
// what the CPU reports (__builtin_cpu_supports).
#include "cpu/kernels/flash_kernels.hpp"

#include "cpu/kernels/exp_constants.hpp"
#include "cpu/kernels/flash_kernels_isa.hpp"

#include <spattn/error.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(SPATTN_KERNELS_X86)
#include <cpuid.h>
#endif

namespace spattn::schedules::flash_kernels {

// Here, in a translation unit without kernels, so that the scalar steps load the constants from
// this one line and cannot fold them back into literals (exp_constants.hpp).
const ExpConstants kExpConstantsLine = kExpConstants;

namespace {

struct KernelTable {
  void (*forward)(const ForwardTile&);
  void (*dq)(const DqTile&);
  void (*dkdv)(const DkdvTile&);
  void (*dq_from_scores)(const DqFromScoresTile&);
};

constexpr KernelTable kPortable{isa::forward_portable, isa::dq_portable, isa::dkdv_portable,
                                isa::dq_from_scores_portable};
#if defined(SPATTN_KERNELS_X86)
constexpr KernelTable kAvx2{isa::forward_avx2, isa::dq_avx2, isa::dkdv_avx2, isa::dq_from_scores_avx2};
constexpr KernelTable kAvx512{isa::forward_avx512, isa::dq_avx512, isa::dkdv_avx512, isa::dq_from_scores_avx512};
// (float32 tiles: the avx512 set's code)
constexpr KernelTable kAvx512Bf16{isa::forward_avx512_bf16, isa::dq_avx512_bf16, isa::dkdv_avx512_bf16,
                                  isa::dq_from_scores_avx512};

// AVX512_BF16 from cpuid (leaf 7, subleaf 1, eax bit 5): neither GCC 12's nor clang 14's
// __builtin_cpu_supports can be relied on to name it. (The avx512 check before it covers the OS
// saving the zmm registers.)
bool has_avx512_bf16() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
  }();
  return supported;
}
#endif

constexpr KernelIsa kAllIsas[] = {KernelIsa::portable, KernelIsa::avx2, KernelIsa::avx512, KernelIsa::avx512_bf16};

const KernelTable& table_of(KernelIsa isa) {
#if defined(SPATTN_KERNELS_X86)
  if (isa == KernelIsa::avx512_bf16) return kAvx512Bf16;
  if (isa == KernelIsa::avx512) return kAvx512;
  if (isa == KernelIsa::avx2) return kAvx2;
#endif
  (void)isa;
  return kPortable;
}

KernelIsa best_supported() {
  if (kernel_isa_supported(KernelIsa::avx512_bf16)) return KernelIsa::avx512_bf16;
  if (kernel_isa_supported(KernelIsa::avx512)) return KernelIsa::avx512;
  if (kernel_isa_supported(KernelIsa::avx2)) return KernelIsa::avx2;
  return KernelIsa::portable;
}

// The set the environment asks for (SPATTN_KERNELS=portable|avx2|avx512|avx512_bf16), else the widest
// supported one. A name that is unknown or not supported here is an error, not a silent fallback.
KernelIsa initial_isa() {
  const char* requested = std::getenv("SPATTN_KERNELS");
  if (requested == nullptr || *requested == '\0') return best_supported();
  for (KernelIsa isa : kAllIsas) {
    if (std::strcmp(requested, kernel_isa_name(isa)) != 0) continue;
    if (!kernel_isa_supported(isa)) {
      fail("SPATTN_KERNELS=", requested, ": this CPU or build does not support these kernels");
    }
    return isa;
  }
  fail("SPATTN_KERNELS=", requested, " is not one of portable, avx2, avx512, avx512_bf16");
}

// The set in use; -1 until first asked.
std::atomic<int> current_isa{-1};

const KernelTable& current_table() {
  int isa = current_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    isa = static_cast<int>(initial_isa());
    current_isa.store(isa, std::memory_order_relaxed);
  }
  return table_of(static_cast<KernelIsa>(isa));
}

}  // namespace

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::portable: return "portable";
    case KernelIsa::avx2: return "avx2";
    case KernelIsa::avx512: return "avx512";
    case KernelIsa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

bool kernel_isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::portable:
      return true;
#if defined(SPATTN_KERNELS_X86)
    case KernelIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::avx512_bf16:
      return kernel_isa_supported(KernelIsa::avx512) && has_avx512_bf16();
#endif
    default:
      return false;
  }
}

KernelIsa kernel_isa() {
  current_table();
  return static_cast<KernelIsa>(current_isa.load(std::memory_order_relaxed));
}

void set_kernel_isa(KernelIsa isa) {
  if (!kernel_isa_supported(isa)) {
    fail("set_kernel_isa: this CPU or build does not support the ", kernel_isa_name(isa), " kernels");
  }
  current_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

bool packs_bf16_pairs(int64_t rows_outer, int64_t width) {
  return kernel_isa() == KernelIsa::avx512_bf16 && rows_outer >= 16 && width <= kMaxPairWidth;
}

const uint32_t* pack_bf16_pairs(float* tile, int64_t width, int64_t rows) {
  if (!packs_bf16_pairs(rows, width)) {
    fail("pack_bf16_pairs: the ", kernel_isa_name(kernel_isa()), " kernels do not take a tile of ", rows,
         " rows and width ", width, " as bfloat16 pairs");
  }
#if defined(SPATTN_KERNELS_X86)
  return isa::pack_bf16_pairs_avx512_bf16(tile, width, rows);
#else
  (void)tile;
  return nullptr;
#endif
}

namespace {
// A step handed pairs runs only on the set that packed them (a set changed in between would read
// the packed bytes as floats). Out of line: the steps' common path is one test of a flag.
[[gnu::noinline, gnu::cold]] void check_takes_pairs(const KernelTable& table, const char* step) {
#if defined(SPATTN_KERNELS_X86)
  if (&table == &kAvx512Bf16) return;
#endif
  (void)table;
  fail(step, ": the tile holds bfloat16 pairs, but the ", kernel_isa_name(kernel_isa()), " kernels are in use");
}
}  // namespace

void forward_tile(const ForwardTile& tile) {
  const KernelTable& table = current_table();
  if (tile.q_packed) check_takes_pairs(table, "flash forward_tile");
  table.forward(tile);
}
void dq_tile(const DqTile& tile) {
  const KernelTable& table = current_table();
  if (tile.q_packed || tile.do_packed) check_takes_pairs(table, "flash dq_tile");
  table.dq(tile);
}
void dkdv_tile(const DkdvTile& tile) {
  const KernelTable& table = current_table();
  if (tile.k_packed || tile.v_packed) check_takes_pairs(table, "flash dkdv_tile");
  table.dkdv(tile);
}
void dq_from_scores_tile(const DqFromScoresTile& tile) { current_table().dq_from_scores(tile); }

}  // namespace spattn::schedules::flash_kernels
