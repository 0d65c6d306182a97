// kmbench-cpu: our exact Lloyd on every core of the CPU (OpenMP), in the subprocess protocol of
// impls/cpu/cpp/harness.hpp. Design (NOTES.md has the byte and instruction counts):
// - The data are shifted by their float64 mean once, before any timed run, and kept in float32
//   (float64 with --float64, below):
//   a float32 distance then keeps its digits however far the data sit from the origin (the
//   same centring kmbench-gpu and scikit-learn do). Sums are float64, per thread, merged once
//   per iteration; the means are added back to the centroids at the end.
// - Low d (d <= LOW_DIM): blocks of 64 points, dimension-major, against every centroid in
//   turn, direct (x - c)^2 in the data's precision, the loop over the block's points vectorised
//   (a running best and label per point; strict <, so ties go to the lower index, as in the
//   oracle).
// - Low d and k >= SORTED_FROM_K: the centroids sorted along the axis where they spread most,
//   each point scanning outward from its place in that order until the axis gap alone rules
//   the rest out (sorted_search.hpp); the same float32 scores, so the same labels.
// - High d: the score |c|^2 / 2 - x . c on the centred data (what the GPU rows compute), as a
//   register block of 4 or 6 points x 16 centroids over all d (a GEMM's micro-kernel), the argmin
//   fused after each block; the n x k scores are never stored.
// - Empty clusters keep their centroid; both stop rules (harness.hpp's StopRule).
// - --float64: the same in double (points, centroids, scores), for kmbench.KMeans on float64
//   data; the portable loops only (the AVX2 code and the sorted search are float32's).
// - --weights FILE: kmbench.KMeans's sample weights, (n, 1) .npy: the means weighted, and a
//   cluster of no weight empty, as scikit-learn's.
// - AVX2 intrinsics where the compiler targets AVX2 (-march=native); the portable loops
//   otherwise, or when built with -DKMBENCH_CPU_PORTABLE (to compare the two on one machine);
//   -DKMBENCH_NO_SORTED scores every centroid at low d (the same comparison for the search).
#include "lloyd.hpp"

namespace {

// Reads the inputs, centres the data in T, runs the harness's timed runs of lloyd<T>, prints the record.
template <typename T>
void run(const kmbench::Options& o, int threads, bool halt_on_empty, const std::string& weights) {
  const kmbench::Inputs in = kmbench::read_inputs(o);
  const kmbench::Matrix &data = in.data, &init = in.init;
  const std::size_t n = data.rows, d = data.cols;
  std::vector<T> x(n * d);
  std::vector<double> mean(d, 0.0), w;
  if (!weights.empty()) {  // an (n, 1) .npy
    kmbench::Matrix read = kmbench::read_npy(weights);
    if (read.rows != n || read.cols != 1) throw std::runtime_error(weights + ": expected one weight a point");
    w = std::move(read.values);
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t a = 0; a < d; ++a) mean[a] += data.values[i * d + a];
  for (double& m : mean) m /= double(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t a = 0; a < d; ++a) x[i * d + a] = T(data.values[i * d + a] - mean[a]);
  const Problem<T> p{n, d, init.rows, x.data(), w.empty() ? nullptr : w.data()};
  kmbench::StopRule stop{o.iterations, o.tol, o.shift_tol};
  std::vector<double> centroids, times, warmup, trace;
  bool emptied = false;
  if (!o.trace.empty())  // every iteration's centroids, moved back from the centred frame
    stop.after_iteration = [&] {
      for (std::size_t j = 0; j < p.k; ++j)
        for (std::size_t a = 0; a < p.d; ++a) trace.push_back(centroids[j * p.d + a] + mean[a]);
    };
  const long executed = kmbench::timed_runs(
      o,
      [&] {  // the harness's start, centred like the data
        centroids = init.values;
        trace.clear();
        emptied = false;
        for (std::size_t j = 0; j < p.k; ++j)
          for (std::size_t a = 0; a < p.d; ++a) centroids[j * p.d + a] -= mean[a];
      },
      [&] { return lloyd(p, centroids, stop, threads, halt_on_empty, emptied); }, times, warmup);
  for (std::size_t j = 0; j < p.k; ++j)
    for (std::size_t a = 0; a < p.d; ++a) centroids[j * p.d + a] += mean[a];
  if (!o.trace.empty()) kmbench::write_npy(o.trace, trace, trace.size() / (p.k * p.d), p.k, p.d);
  kmbench::print_json(centroids, p.d, executed, times, warmup,
                      std::string("\"strategy\": \"") + name_of(path_for(p.d, p.k, std::is_same_v<T, double>)) +
                          "\", \"scalar\": \"" + (std::is_same_v<T, double> ? "fp64" : "fp32") +
                          "\", \"emptied\": " + (emptied ? "true" : "false"));
}

}  // namespace

int main(int argc, char** argv) {
  return kmbench::guarded([&] {
    int threads = omp_get_max_threads();
    bool halt_on_empty = false, wide = false;
    std::string weights;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--threads" && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
      else if (std::string(argv[i]) == "--halt-on-empty") halt_on_empty = true;
      else if (std::string(argv[i]) == "--float64") wide = true;
      else if (std::string(argv[i]) == "--weights" && i + 1 < argc) weights = argv[++i];
      else rest.push_back(argv[i]);
    }
    const kmbench::Options o = kmbench::parse(int(rest.size()), rest.data());
    if (wide) run<double>(o, threads, halt_on_empty, weights);
    else run<float>(o, threads, halt_on_empty, weights);
  });
}
