// spattn attention: runs attention on tensors from .npy files and writes the results as .npy.
//   spattn attention --q Q.npy --k K.npy --v V.npy [--do dO.npy] --mask SPEC|FILE.mtx --out DIR
// Shapes are (seqlen, head_dim) or (batch, heads, seqlen, head_dim); K and V may have fewer heads
// (grouped-query attention). Q, K and V may also be Matrix Market files (sparse inputs, one head:
// every tensor rank 2); the scheduled algorithms then load them as CSR (sparse_inputs.hpp) and the
// command reports Z_input. Writes o.npy, lse.npy, and dq.npy, dk.npy, dv.npy when dO is given,
// all or nothing. .npy inputs may be float16, float32 or float64; --dtype float16 / bfloat16 runs
// the scheduled algorithms on 16-bit tensors (the values read, rounded to the type).
#include "cli_support.hpp"
#include "commands.hpp"

#include <spattn/io.hpp>
#include <spattn/attention.hpp>
#include <spattn/elements.hpp>
#include <spattn/plan.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>
#include <spattn/tensor.hpp>

#include <sparse_formats/convert.hpp>
#include <sparse_formats/npy.hpp>

#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

namespace spattn::cli {

namespace {

struct AttentionCommand {
  std::string q, k, v, d_o, mask, out;
  std::optional<double> scale;
  std::string algorithm = "reference";
  std::string out_dtype = "float32";
  std::string dtype = "float32";  // the scheduled algorithms' element type
  int64_t cache_words = 0;
  int64_t line_words = io::kDefaultLineWords;
  std::string objective = "time";
  bool io = false;
};

// A tensor as read, in double; a Matrix Market input is kept as CSR (float values, as the
// schedules load it), its view has the shape and no data until densify() (the reference's input).
struct LoadedTensor {
  sparse_formats::NpyArrayT<double> array;
  TensorView<const double> view;
  std::optional<sparse_formats::CsrMatrix<int64_t, float>> csr;
};

// A CSR input densified in place (after every shape check: a wide CSR costs rows x cols words).
void densify(LoadedTensor& tensor) {
  if (!tensor.csr || tensor.view.data != nullptr) return;
  const auto wide = sparse_formats::csr_to_dense(tensor.csr->view());
  tensor.array.data.assign(wide.begin(), wide.end());
  tensor.view = TensorView<const double>::matrix(tensor.array.data.data(), tensor.csr->num_rows(),
                                                 tensor.csr->num_cols());
}

LoadedTensor load_tensor(const std::string& path, const std::string& flag) {
  LoadedTensor tensor;
  if (is_matrix_market(path)) {
    tensor.csr = load_csr_input(path, flag);
    tensor.array.shape = {tensor.csr->num_rows(), tensor.csr->num_cols()};
    tensor.view = TensorView<const double>::matrix(nullptr, tensor.csr->num_rows(), tensor.csr->num_cols());
    return tensor;
  } else {
    tensor.array = sparse_formats::read_npy<double>(path);
  }
  const auto& shape = tensor.array.shape;
  if (shape.size() == 2) {
    tensor.view = TensorView<const double>::matrix(tensor.array.data.data(), shape[0], shape[1]);
  } else if (shape.size() == 4) {
    tensor.view = TensorView<const double>::contiguous(tensor.array.data.data(), shape[0], shape[1],
                                                       shape[2], shape[3]);
  } else {
    throw UsageError(flag + ": " + path + " has rank " + std::to_string(shape.size()) +
                     "; expected (seqlen, head_dim) or (batch, heads, seqlen, head_dim)");
  }
  return tensor;
}

// The shape to write an output with: rank 2 when the inputs were rank 2.
std::vector<int64_t> output_shape(const LoadedTensor& like, int64_t last_dim, bool drop_last) {
  const auto& v = like.view;
  std::vector<int64_t> shape;
  if (like.array.shape.size() == 4) shape = {v.batch(), v.heads()};
  shape.push_back(v.seqlen());
  if (!drop_last) shape.push_back(last_dim);
  return shape;
}

void write_output(StagedDirectory& out, const std::string& name, const std::vector<double>& data,
                  const std::vector<int64_t>& shape, const std::string& dtype) {
  if (dtype == "float64") {
    sparse_formats::write_npy<double>(out.path(name), data.data(), shape);
  } else {
    const std::vector<float> narrow(data.begin(), data.end());
    sparse_formats::write_npy<float>(out.path(name), narrow.data(), shape);
  }
}

spattn::AttentionOptions api_options(const AttentionCommand& options, double scale) {
  spattn::AttentionOptions api;
  api.algorithm = parse_algorithm(options.algorithm);
  api.scale = scale;
  api.cache_words = options.cache_words;
  api.line_words = options.line_words;
  api.objective = spattn::parse_plan_objective(options.objective);
  return api;
}

// With --io: the plan and the counted ledger of one pass.
void report_io(const AttentionCommand& options, const Plan& plan, const char* pass, const io::Ledger& ledger) {
  if (options.io) std::cout << plan.to_string() << "counted (" << pass << "):\n" << ledger.report() << '\n';
}

struct ScheduledResult {
  reference::ForwardResult forward;
  std::optional<reference::BackwardResult> backward;
};

// Copies of the inputs in T (float, half_t or bfloat16_t: the values read, rounded to T through
// float), the algorithm's outputs widened back to double for writing.
template <typename T>
ScheduledResult run_schedule(const AttentionCommand& options, const LoadedTensor& q,
                             const LoadedTensor& k, const LoadedTensor& v,
                             const std::optional<LoadedTensor>& d_o, const Mask& mask,
                             double scale) {
  auto narrow = [](const LoadedTensor& t) {
    std::vector<T> out(t.array.data.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = from_float<T>(static_cast<float>(t.array.data[i]));
    return out;
  };
  auto widen = [](const auto& data) {
    std::vector<double> out(data.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = to_float(data[i]);
    return out;
  };
  auto view = [](auto& data, const TensorView<const double>& like, int64_t last) {
    return TensorView<std::remove_reference_t<decltype(data[0])>>::contiguous(data.data(), like.batch(), like.heads(),
                                                                             like.seqlen(), last);
  };
  std::vector<T> qt = narrow(q), kt = narrow(k), vt = narrow(v);
  const TensorView<const T> qv = view(qt, q.view, q.view.head_dim()), kv = view(kt, k.view, k.view.head_dim()),
                            vv = view(vt, v.view, v.view.head_dim());
  const int64_t rows = q.view.batch() * q.view.heads() * q.view.seqlen();
  std::vector<T> ot(static_cast<size_t>(rows * v.view.head_dim()));
  std::vector<float> lsef(static_cast<size_t>(rows));
  const auto ov = view(ot, q.view, v.view.head_dim());
  const auto lsev = view(lsef, q.view, 1);

  spattn::AttentionOptions api = api_options(options, scale);
  io::Ledger forward_ledger(api.line_words), backward_ledger(api.line_words);
  if (options.io) api.ledger = &forward_ledger;
  const Plan forward_plan = attention_forward(qv, kv, vv, ov, lsev, mask, api);
  ScheduledResult result;
  result.forward.o = widen(ot);
  result.forward.lse = widen(lsef);
  report_io(options, forward_plan, "forward", forward_ledger);
  if (!d_o) return result;

  std::vector<T> dot = narrow(*d_o);
  std::vector<T> dqt(qt.size()), dkt(kt.size()), dvt(vt.size());
  if (options.io) api.ledger = &backward_ledger;
  const Plan backward_plan = attention_backward(
      qv, kv, vv, TensorView<const T>(ov), TensorView<const float>(lsev),
      TensorView<const T>(view(dot, d_o->view, d_o->view.head_dim())), view(dqt, q.view, q.view.head_dim()),
      view(dkt, k.view, k.view.head_dim()), view(dvt, v.view, v.view.head_dim()), mask, api);
  result.backward = reference::BackwardResult{widen(dqt), widen(dkt), widen(dvt)};
  report_io(options, backward_plan, "backward", backward_ledger);
  return result;
}

// A loaded tensor as a one-head input of sparse_inputs.hpp (float; CSR when it came from .mtx).
struct FloatInput {
  std::vector<float> dense;
  AttentionInput input;
};
FloatInput float_input(const LoadedTensor& t) {
  FloatInput in;
  if (t.csr) {
    in.input = AttentionInput::csr(t.csr->view());
  } else {
    in.dense.assign(t.array.data.begin(), t.array.data.end());
    in.input = AttentionInput::dense(TensorView<const float>::matrix(in.dense.data(), t.view.seqlen(), t.view.head_dim()));
  }
  return in;
}

std::string describe(const char* name, const AttentionInput& input) {
  const double area = static_cast<double>(input.seqlen()) * static_cast<double>(input.head_dim());
  return std::string(name) + (input.is_csr() ? " CSR " : " dense ") + std::to_string(input.seqlen()) + " x " +
         std::to_string(input.head_dim()) + ", " + std::to_string(input.nnz()) + " stored (density " +
         format_real(area > 0 ? static_cast<double>(input.nnz()) / area : 0.0) + ")";
}

// The sparse-input path: one head, CSR inputs loaded as CSR by the schedules.
ScheduledResult run_sparse_schedule(const AttentionCommand& options, const LoadedTensor& q,
                                    const LoadedTensor& k, const LoadedTensor& v,
                                    const std::optional<LoadedTensor>& d_o, const Mask& mask, double scale) {
  const FloatInput qf = float_input(q), kf = float_input(k), vf = float_input(v);
  const AttentionInputs inputs{qf.input, kf.input, vf.input};
  const int64_t m = q.view.seqlen(), e = v.view.head_dim();
  std::vector<float> of(static_cast<size_t>(m * e)), lsef(static_cast<size_t>(m));
  const auto ov = TensorView<float>::matrix(of.data(), m, e), lsev = TensorView<float>::matrix(lsef.data(), m, 1);
  spattn::AttentionOptions api = api_options(options, scale);
  io::Ledger forward_ledger(api.line_words), backward_ledger(api.line_words);
  if (options.io) api.ledger = &forward_ledger;
  const Plan forward_plan = attention_forward(inputs, ov, lsev, mask, api);
  report_io(options, forward_plan, "forward", forward_ledger);
  ScheduledResult result;
  result.forward.o.assign(of.begin(), of.end());
  result.forward.lse.assign(lsef.begin(), lsef.end());
  if (!d_o) return result;

  const std::vector<float> dof(d_o->array.data.begin(), d_o->array.data.end());
  const int64_t n = k.view.seqlen(), d = q.view.head_dim();
  std::vector<float> dqf(static_cast<size_t>(m * d)), dkf(static_cast<size_t>(n * d)), dvf(static_cast<size_t>(n * e));
  if (options.io) api.ledger = &backward_ledger;
  const Plan backward_plan = attention_backward(
      inputs, TensorView<const float>::matrix(of.data(), m, e), TensorView<const float>::matrix(lsef.data(), m, 1),
      TensorView<const float>::matrix(dof.data(), d_o->view.seqlen(), d_o->view.head_dim()),
      TensorView<float>::matrix(dqf.data(), m, d), TensorView<float>::matrix(dkf.data(), n, d),
      TensorView<float>::matrix(dvf.data(), n, e), mask, api);
  report_io(options, backward_plan, "backward", backward_ledger);
  result.backward = reference::BackwardResult{{dqf.begin(), dqf.end()}, {dkf.begin(), dkf.end()}, {dvf.begin(), dvf.end()}};
  return result;
}

// "inputs: q CSR 97 x 16, 306 stored (density 0.197); ..." and Z_input, for inputs from .mtx.
void report_inputs(const LoadedTensor& q, const LoadedTensor& k, const LoadedTensor& v) {
  const FloatInput qf = float_input(q), kf = float_input(k), vf = float_input(v);
  const AttentionInputs inputs{qf.input, kf.input, vf.input};
  std::cout << "inputs: " << describe("q", inputs.q) << "; " << describe("k", inputs.k) << "; "
            << describe("v", inputs.v) << "\nZ_input = (nnz(Q) + nnz(K)) / 2 = " << format_real(inputs.z_input(), 12)
            << '\n';
}

// The shapes agree (as the API checks them, but before a CSR input is densified).
void check_shapes(const LoadedTensor& q, const LoadedTensor& k, const LoadedTensor& v,
                  const std::optional<LoadedTensor>& d_o) {
  if (q.array.shape.size() != k.array.shape.size() || q.array.shape.size() != v.array.shape.size()) {
    throw UsageError("--q, --k, --v: tensors must all be rank 2 or all rank 4");
  }
  auto differ = [](const char* what, const std::string& a, int64_t x, const std::string& b, int64_t y) {
    if (x != y) throw UsageError(a + " has " + what + " " + std::to_string(x) + ", " + b + " has " + std::to_string(y));
  };
  differ("head_dim", "--k", k.view.head_dim(), "--q", q.view.head_dim());
  differ("seqlen", "--v", v.view.seqlen(), "--k", k.view.seqlen());
  if (d_o) {
    differ("seqlen", "--do", d_o->view.seqlen(), "--q", q.view.seqlen());
    differ("head_dim", "--do", d_o->view.head_dim(), "--v", v.view.head_dim());
  }
}

// The scheduled algorithms run in float32: a finite double past its range would become infinity.
void check_float32_range(const LoadedTensor& tensor, const std::string& flag) {
  for (size_t i = 0; i < tensor.array.data.size(); ++i) {
    const double value = tensor.array.data[i];
    if (std::isfinite(value) && std::abs(value) > static_cast<double>(std::numeric_limits<float>::max())) {
      throw UsageError(flag + ": element " + std::to_string(i) + " = " + format_real(value, 6) +
                       " is outside float32's range (the scheduled algorithms run in float32; "
                       "--algorithm reference runs in float64)");
    }
  }
}

void run_attention(const AttentionCommand& options) {
  StagedDirectory out(options.out);  // a bad --out fails here, before anything is read or computed
  LoadedTensor q = load_tensor(options.q, "--q");
  LoadedTensor k = load_tensor(options.k, "--k");
  LoadedTensor v = load_tensor(options.v, "--v");
  std::optional<LoadedTensor> d_o;
  if (!options.d_o.empty()) d_o = load_tensor(options.d_o, "--do");
  check_shapes(q, k, v, d_o);
  if (d_o) densify(*d_o);
  if (options.algorithm != "reference") {
    for (const auto& [tensor, flag] : {std::pair<const LoadedTensor*, const char*>{&q, "--q"}, {&k, "--k"}, {&v, "--v"}}) {
      check_float32_range(*tensor, flag);
    }
    if (d_o) check_float32_range(*d_o, "--do");
  }
  const double scale = options.scale.value_or(
      q.view.head_dim() > 0 ? 1.0 / std::sqrt(static_cast<double>(q.view.head_dim())) : 1.0);
  if (!std::isfinite(scale)) throw UsageError("--scale: must be finite");
  const auto mask = load_mask(options.mask, q.view.seqlen(), k.view.seqlen(), "--mask");
  const reference::MaskList<int64_t> masks{mask.view()};
  const bool sparse = q.csr || k.csr || v.csr;
  if (sparse && q.array.shape.size() != 2) {
    throw UsageError("--q, --k, --v: Matrix Market inputs are one head: every tensor must be rank 2");
  }
  if (sparse) report_inputs(q, k, v);
  if (options.dtype != "float32" && (sparse || options.algorithm == "reference")) {
    throw UsageError("--dtype " + options.dtype + ": 16-bit tensors run the dense scheduled algorithms (flash, " +
                     "small_cache, auto); " + (sparse ? "Matrix Market inputs run in float32" :
                                                        "--algorithm reference runs in float64"));
  }

  // Compute everything before writing anything.
  reference::ForwardResult forward;
  std::optional<reference::BackwardResult> backward;
  if (options.algorithm == "reference") {
    for (LoadedTensor* tensor : {&q, &k, &v}) densify(*tensor);
    forward = reference::forward<int64_t>(q.view, k.view, v.view, masks, scale);
    if (d_o) backward = reference::backward<int64_t>(q.view, k.view, v.view, d_o->view, masks, scale);
  } else {
    const Mask prepared = Mask::from_csr(sparse_formats::CsrPattern<int64_t>(mask), "--mask");
    const auto scheduled = sparse                        ? run_sparse_schedule(options, q, k, v, d_o, prepared, scale)
                           : options.dtype == "float16"  ? run_schedule<half_t>(options, q, k, v, d_o, prepared, scale)
                           : options.dtype == "bfloat16" ? run_schedule<bfloat16_t>(options, q, k, v, d_o, prepared, scale)
                                                         : run_schedule<float>(options, q, k, v, d_o, prepared, scale);
    forward = scheduled.forward;
    backward = scheduled.backward;
  }

  write_output(out, "o.npy", forward.o, output_shape(q, v.view.head_dim(), false), options.out_dtype);
  write_output(out, "lse.npy", forward.lse, output_shape(q, 0, true), options.out_dtype);
  if (backward) {
    write_output(out, "dq.npy", backward->dq, output_shape(q, q.view.head_dim(), false), options.out_dtype);
    write_output(out, "dk.npy", backward->dk, output_shape(k, k.view.head_dim(), false), options.out_dtype);
    write_output(out, "dv.npy", backward->dv, output_shape(v, v.view.head_dim(), false), options.out_dtype);
  }
  out.commit({"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"});
  std::cout << "wrote " << (backward ? "o, lse, dq, dk, dv" : "o, lse") << " to " << options.out
            << " (algorithm " << options.algorithm << ", scale " << scale << ")\n";
}

}  // namespace

void register_attention(CLI::App& app) {
  auto options = std::make_shared<AttentionCommand>();
  CLI::App* cmd = app.add_subcommand("attention", "Run attention on .npy tensors, write .npy results");
  cmd->add_option("--q", options->q, "Queries: (seqlen_q, head_dim) or (batch, heads, seqlen_q, head_dim) .npy, or a sparse .mtx")->required();
  cmd->add_option("--k", options->k, "Keys: (seqlen_k, head_dim) or (batch, kv_heads, seqlen_k, head_dim) .npy, or a sparse .mtx")->required();
  cmd->add_option("--v", options->v, "Values: (seqlen_k, head_dim_v) or (batch, kv_heads, seqlen_k, head_dim_v) .npy, or a sparse .mtx")->required();
  cmd->add_option("--do", options->d_o, "Output gradient dO (same shape as O); when given, writes dq, dk, dv");
  cmd->add_option("--mask", options->mask, "A PATTERN-SPEC (e.g. causal, sliding_window:w=128) or a .mtx file")->required();
  cmd->add_option("--scale", options->scale, "Softmax scale (default 1/sqrt(head_dim))");
  cmd->add_option("--algorithm", options->algorithm, "Algorithm")
      ->check(CLI::IsMember({"reference", "flash", "small_cache", "auto"}))->capture_default_str();
  cmd->add_option("--cache-words", options->cache_words,
                  "Fast-memory size M in words for flash / small_cache / auto "
                  "(0: 4 x this machine's L1d, at most L2 / 2)")
      ->check(at_least(0))->capture_default_str();
  CLI::Option* line_words = add_line_words_flag(cmd, options->line_words);
  cmd->add_option("--objective", options->objective,
                  "What the plan minimizes over a mask: time (flash's tiles and auto's choice priced for speed) or words")
      ->check(CLI::IsMember({"time", "words"}))->capture_default_str();
  cmd->add_flag("--io", options->io, "Print the plan and the counted I/O ledger (per operand, peak resident)");
  cmd->add_option("--out-dtype", options->out_dtype, "dtype of the written .npy files")
      ->check(CLI::IsMember({"float32", "float64"}))->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "Element type the scheduled algorithms run in: the inputs are rounded to it and the outputs "
                  "computed in it (LSE float32); without --line-words, lines of 64 bytes of it")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}))->capture_default_str();
  cmd->add_option("--out", options->out, "Output directory (written all or nothing)")->required();
  cmd->callback([options, line_words] {
    // A 64-byte line of the run's elements unless --line-words says otherwise (32 for 16-bit).
    if (line_words->count() == 0) {
      options->line_words = io::line_words_of(options->dtype == "float16"    ? ElementType::fp16
                                              : options->dtype == "bfloat16" ? ElementType::bf16
                                                                             : ElementType::fp32);
    }
    run_attention(*options);
  });
}

}  // namespace spattn::cli
