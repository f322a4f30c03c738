// The array conversions of 16-bit storage (io.hpp, widen_16bit / narrow_16bit): the loads and
// stores of every fp16 / bf16 call go through them, once per element moved. Runs of 8 take AVX2
// (bf16: shifts and integer rounding) and F16C (fp16) where the CPU has them; the tails, and
// CPUs without them, the scalar conversions of spattn/elements.hpp. Both round to nearest even, so the bits of
// a finite value do not depend on the path.
#include <spattn/io.hpp>

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SPATTN_CONVERT_X86 1
#endif

namespace spattn::io {

namespace {

void widen_scalar(Storage storage, const uint16_t* in, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = widen_one(storage, in[i]);
}

void narrow_scalar(Storage storage, const float* in, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = narrow_one(storage, in[i]);
}

#ifdef SPATTN_CONVERT_X86

__attribute__((target("avx2"))) int64_t widen_bf16_avx2(const uint16_t* in, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)));
  }
  return i;
}

// to_bfloat16 on 8 lanes: (x + 0x7fff + ((x >> 16) & 1)) >> 16, and a NaN kept quiet.
__attribute__((target("avx2"))) int64_t narrow_bf16_avx2(const float* in, int64_t count, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff), infinity = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), odd), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, magnitude_mask), infinity);
    const __m256i kept = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
    const __m256i result = _mm256_blendv_epi8(rounded, kept, nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(result), _mm256_extracti128_si256(result, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t widen_fp16_f16c(const uint16_t* in, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t narrow_fp16_f16c(const float* in, int64_t count, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i bits = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), bits);
  }
  return i;
}

bool has_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
// F16C from cpuid (leaf 1, ecx): clang's __builtin_cpu_supports has no "f16c"; "avx" checks that
// the OS saves the ymm registers.
bool has_f16c() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return supported;
}

#endif

}  // namespace

namespace {

// Unit-stride runs: the vector loops where the CPU has them, the scalar conversions for the rest.
void widen_run(Storage storage, const uint16_t* in, int64_t count, float* out) {
  int64_t done = 0;
#ifdef SPATTN_CONVERT_X86
  if (storage == Storage::bf16 && has_avx2()) done = widen_bf16_avx2(in, count, out);
  if (storage == Storage::fp16 && has_f16c()) done = widen_fp16_f16c(in, count, out);
#endif
  widen_scalar(storage, in + done, count - done, out + done);
}

void narrow_run(Storage storage, const float* in, int64_t count, uint16_t* out) {
  int64_t done = 0;
#ifdef SPATTN_CONVERT_X86
  if (storage == Storage::bf16 && has_avx2()) done = narrow_bf16_avx2(in, count, out);
  if (storage == Storage::fp16 && has_f16c()) done = narrow_fp16_f16c(in, count, out);
#endif
  narrow_scalar(storage, in + done, count - done, out + done);
}

// Strided runs (a transposed tile's rows) go through a small contiguous staging array, so they
// take the vector conversions too.
constexpr int64_t kStaged = 64;

}  // namespace

void widen_16bit(Storage storage, const uint16_t* in, int64_t stride, int64_t count, float* out) {
  if (stride == 1) return widen_run(storage, in, count, out);
  uint16_t staged[kStaged];
  for (int64_t start = 0; start < count; start += kStaged) {
    const int64_t chunk = std::min(kStaged, count - start);
    for (int64_t i = 0; i < chunk; ++i) staged[i] = in[(start + i) * stride];
    widen_run(storage, staged, chunk, out + start);
  }
}

void narrow_16bit(Storage storage, const float* in, int64_t count, uint16_t* out, int64_t stride) {
  if (stride == 1) return narrow_run(storage, in, count, out);
  uint16_t staged[kStaged];
  for (int64_t start = 0; start < count; start += kStaged) {
    const int64_t chunk = std::min(kStaged, count - start);
    narrow_run(storage, in + start, chunk, staged);
    for (int64_t i = 0; i < chunk; ++i) out[(start + i) * stride] = staged[i];
  }
}

}  // namespace spattn::io
