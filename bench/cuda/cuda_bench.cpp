// Times spattn's CUDA attention (forward, backward, forward + backward) on block masks and writes
// the figures as JSON, with each mask's CSR, for bench/cuda/torch_compare.py to run FlexAttention
// and SDPA on the same masks.
//
//   spattn_cuda_bench --out DIR [--n 16384] [--d 128] [--heads 16] [--reps 5] [--dtype bf16]
//                     [--algorithm flash] [--mask NAME=SPEC]... [--dump DIR]
//
// --dump DIR writes the inputs (q, k, v, dO) and, per mask, the outputs (o, lse, dq, dk, dv) as raw
// little-endian arrays, so that torch_compare.py checks spattn's results at the benchmark's size
// against an fp32 reference and runs FlexAttention on the very same inputs.
//
// Throughput counts attended pairs only: forward 4 |Omega| d flops per head (Q K^T and P V),
// backward 2.5 times that (FlashAttention's convention), forward + backward 3.5 times.
#include <spattn/cuda.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using spattn::TensorView;
namespace cu = spattn::cuda;

struct Args {
  std::string out = ".";
  int64_t n = 16384, d = 128, heads = 16, reps = 5;
  std::string dtype = "bf16";
  std::string dump;  // empty: write no tensors
  cu::CudaAlgorithm algorithm = cu::CudaAlgorithm::flash;
  std::vector<std::pair<std::string, std::string>> masks;
};

// A whole number >= 1, or an error naming the flag and the value.
int64_t positive(const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t parsed = 0;
  try {
    parsed = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || parsed < 1) {
    throw std::invalid_argument(key + " takes a whole number >= 1, got '" + value + "'");
  }
  return parsed;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + key);
    const std::string value = argv[++i];
    if (key == "--out") a.out = value;
    else if (key == "--n") a.n = positive(key, value);
    else if (key == "--d") a.d = positive(key, value);
    else if (key == "--heads") a.heads = positive(key, value);
    else if (key == "--reps") a.reps = positive(key, value);
    else if (key == "--dtype") a.dtype = value;
    else if (key == "--dump") a.dump = value;
    else if (key == "--algorithm") {
      if (value != "flash" && value != "small_cache") {
        throw std::invalid_argument("--algorithm takes flash or small_cache, got '" + value + "'");
      }
      a.algorithm = value == "small_cache" ? cu::CudaAlgorithm::small_cache : cu::CudaAlgorithm::flash;
    }
    else if (key == "--mask") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--mask takes NAME=SPEC, got " + value);
      a.masks.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else {
      throw std::invalid_argument("unknown option " + key);
    }
  }
  if (a.masks.empty()) {
    a.masks = {{"sliding_window", "sliding_window:w=256"}, {"bigbird", "bigbird:block=64,w=1,g=2,r=3,seed=0"}};
  }
  return a;
}

template <typename F>
double median_ms(int64_t reps, F&& run) {
  run();  // warm-up (uploads the mask's tile lists once; later calls hit the cache)
  std::vector<double> times;
  for (int64_t r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();  // synchronizes before returning
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

template <typename E>
void write_raw(const std::string& path, const E* data, size_t count) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(E)));
  if (!file) throw std::runtime_error("cannot write " + path);
}

template <typename E>
void dump(const std::string& path, const cu::DeviceMemory<E>& memory) {
  const std::vector<E> host = memory.download();
  write_raw(path, host.data(), host.size());
}

// Independent standard-normal inputs (q == k would make every row's largest score its diagonal).
template <typename T>
std::vector<T> random_input(std::mt19937& engine, int64_t numel) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> host(static_cast<size_t>(numel));
  for (T& x : host) x = cu::from_float<T>(normal(engine));
  return host;
}

template <typename T>
std::string run(const Args& a) {
  const int64_t n = a.n, d = a.d, h = a.heads, numel = h * n * d;
  std::mt19937 engine(1);
  cu::DeviceMemory<T> q(random_input<T>(engine, numel)), k(random_input<T>(engine, numel)),
      v(random_input<T>(engine, numel)), d_o(random_input<T>(engine, numel));
  if (!a.dump.empty()) {
    dump(a.dump + "/q.raw", q);
    dump(a.dump + "/k.raw", k);
    dump(a.dump + "/v.raw", v);
    dump(a.dump + "/do.raw", d_o);
  }
  cu::DeviceMemory<T> o(static_cast<size_t>(numel)), dq(static_cast<size_t>(numel)), dk(static_cast<size_t>(numel)),
      dv(static_cast<size_t>(numel));
  cu::DeviceMemory<float> lse(static_cast<size_t>(h * n));
  using V = TensorView<T>;
  using C = TensorView<const T>;
  const V qv = V::contiguous(q.data(), 1, h, n, d), kv = V::contiguous(k.data(), 1, h, n, d);
  const V vv = V::contiguous(v.data(), 1, h, n, d), ov = V::contiguous(o.data(), 1, h, n, d);
  const V dov = V::contiguous(d_o.data(), 1, h, n, d), dqv = V::contiguous(dq.data(), 1, h, n, d);
  const V dkv = V::contiguous(dk.data(), 1, h, n, d), dvv = V::contiguous(dv.data(), 1, h, n, d);
  const auto lsev = TensorView<float>::contiguous(lse.data(), 1, h, n, 1);
  cu::Options options;
  options.algorithm = a.algorithm;

  std::string json = "{\"n\": " + std::to_string(n) + ", \"d\": " + std::to_string(d) + ", \"heads\": " +
                     std::to_string(h) + ", \"dtype\": \"" + a.dtype + "\", \"algorithm\": \"" +
                     cu::cuda_algorithm_name(a.algorithm) + "\", \"dump\": \"" + a.dump + "\", \"masks\": [";
  for (size_t m = 0; m < a.masks.size(); ++m) {
    const auto& [name, spec] = a.masks[m];
    const spattn::Mask mask = spattn::Mask::from_spec(spec, n, n);
    const auto csr = mask.csr();
    write_raw(a.out + "/" + name + ".row_ptr.i64", csr.row_ptr, static_cast<size_t>(n + 1));
    write_raw(a.out + "/" + name + ".col_idx.i64", csr.col_idx, static_cast<size_t>(csr.nnz()));
    cu::DeviceRun fwd_run, bwd_run;
    auto forward = [&] { fwd_run = cu::attention_forward<T>(C(qv), C(kv), C(vv), ov, lsev, mask, options); };
    auto backward = [&] {
      bwd_run = cu::attention_backward<T>(C(qv), C(kv), C(vv), C(ov), TensorView<const float>(lsev), C(dov), dqv, dkv,
                                          dvv, mask, options);
    };
    const double fwd_ms = median_ms(a.reps, forward);
    const double bwd_ms = median_ms(a.reps, backward);
    const double both_ms = median_ms(a.reps, [&] {
      forward();
      backward();
    });
    if (!a.dump.empty()) {  // the outputs of the last forward + backward
      for (auto [suffix, memory] : {std::pair{"o", &o}, {"dq", &dq}, {"dk", &dk}, {"dv", &dv}}) {
        dump(a.dump + "/" + name + "." + suffix + ".raw", *memory);
      }
      dump(a.dump + "/" + name + ".lse.raw", lse);
    }
    const double fwd_flops = 4.0 * static_cast<double>(mask.nnz()) * static_cast<double>(d) * static_cast<double>(h);
    auto tflops = [](double flops, double ms) { return flops / (ms * 1e-3) / 1e12; };
    std::printf("spattn %-15s %-14s nnz %lld (density %.4f)  fwd %8.3f ms %6.2f TFLOP/s  bwd %8.3f ms %6.2f TFLOP/s  "
                "fwd+bwd %8.3f ms %6.2f TFLOP/s\n  %s\n  %s\n",
                cu::cuda_algorithm_name(a.algorithm), name.c_str(), static_cast<long long>(mask.nnz()), mask.density(),
                fwd_ms, tflops(fwd_flops, fwd_ms), bwd_ms, tflops(2.5 * fwd_flops, bwd_ms), both_ms,
                tflops(3.5 * fwd_flops, both_ms), fwd_run.to_string().c_str(), bwd_run.to_string().c_str());
    json += std::string(m ? ", " : "") + "{\"name\": \"" + name + "\", \"spec\": \"" + spec + "\", \"nnz\": " +
            std::to_string(mask.nnz()) + ", \"fwd_ms\": " + std::to_string(fwd_ms) + ", \"bwd_ms\": " +
            std::to_string(bwd_ms) + ", \"fwd_bwd_ms\": " + std::to_string(both_ms) + ", \"fwd_plan\": \"" +
            fwd_run.to_string() + "\", \"bwd_plan\": \"" + bwd_run.to_string() + "\"}";
  }
  return json + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (!cu::device_available()) {
      std::cerr << "spattn_cuda_bench: " << cu::device_status() << "\n";
      return 2;
    }
    std::printf("device: %lld bytes shared memory per block (opt-in)\n",
                static_cast<long long>(cu::shared_memory_per_block()));
    std::string json;
    if (a.dtype == "bf16") json = run<cu::bfloat16_t>(a);
    else if (a.dtype == "fp16") json = run<cu::half_t>(a);
    else if (a.dtype == "fp32") json = run<float>(a);
    else throw std::invalid_argument("--dtype must be bf16, fp16 or fp32, got " + a.dtype);
    std::ofstream(a.out + "/spattn_cuda.json") << json << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "spattn_cuda_bench: " << e.what() << "\n";
    return 1;
  }
}
