// The native side of kmbench's subprocess protocol, shared by every C++ implementation.
//
// A program reads the dataset and the harness's initial centroids from .npy files, runs
// the warm-up and the counted repeats itself, times only the Lloyd loop with
// std::chrono::steady_clock, and prints one JSON document on stdout:
//   {"centroids": [[...], ...], "iterations": N, "times": [...], "warmup_times": [...]}
// where N is the iterations the last run executed: exactly --iters, or, with --tol, until
// the fraction of points that changed cluster in an iteration is <= tol (at most --iters).
// Any failure prints one line on stderr and exits non-zero.
// With --trace FILE (the judge's untimed run: no warm-up, one repeat) the run also writes the
// centroids after each of its iterations to FILE, a (N, k, d) float64 .npy.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kmbench {

struct Matrix {  // row-major n x d, converted to the program's scalar type
  std::size_t rows = 0, cols = 0;
  std::vector<double> values;
};

// Reads a C-ordered 2-D .npy of little-endian float32 or float64.
inline Matrix read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  char magic[6];
  in.read(magic, 6);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + " is not a .npy file");
  unsigned char version[2];
  in.read(reinterpret_cast<char*>(version), 2);
  std::uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char len[2];
    in.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (len[1] << 8);
  } else {
    unsigned char len[4];
    in.read(reinterpret_cast<char*>(len), 4);
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (std::uint32_t(len[3]) << 24);
  }
  std::string header(header_len, ' ');
  in.read(&header[0], header_len);
  if (!in) throw std::runtime_error(path + ": truncated header");
  const bool is_f4 = header.find("'<f4'") != std::string::npos;
  const bool is_f8 = header.find("'<f8'") != std::string::npos;
  if (!is_f4 && !is_f8) throw std::runtime_error(path + ": dtype must be float32 or float64");
  if (header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(path + ": must be C-ordered");
  const auto open = header.find('(', header.find("'shape'"));
  const auto close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) throw std::runtime_error(path + ": no shape");
  const std::string shape = header.substr(open + 1, close - open - 1);
  Matrix m;
  if (std::sscanf(shape.c_str(), "%zu, %zu", &m.rows, &m.cols) != 2 || m.rows == 0 || m.cols == 0)
    throw std::runtime_error(path + ": must be a non-empty 2-D array, shape (" + shape + ")");
  const std::size_t count = m.rows * m.cols;
  m.values.resize(count);
  if (is_f8) {
    in.read(reinterpret_cast<char*>(m.values.data()), count * sizeof(double));
  } else {
    std::vector<float> raw(count);
    in.read(reinterpret_cast<char*>(raw.data()), count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) m.values[i] = raw[i];
  }
  if (!in) throw std::runtime_error(path + ": truncated data");
  return m;
}

// kmbench's stop rules. An iteration assigns every point and updates the means; with a
// tolerance the run stops after the first iteration in which at most tol * n points changed
// cluster (none, for tol = 0). In the first iteration every point counts as changed.
// shift_tol >= 0 (kmbench.KMeans, scikit-learn's rule, for a program that calls `still`): also
// stop after an iteration whose centroids moved by at most shift_tol, summed squared shift.
struct StopRule {
  long max_iter = 300;
  double tol = -1;  // < 0: exactly max_iter iterations
  double shift_tol = -1;
  bool done(std::size_t changed, std::size_t n) const {
    return tol >= 0 && double(changed) <= tol * double(n);
  }
  bool still(double squared_shift) const { return shift_tol >= 0 && squared_shift <= shift_tol; }
  // Called by a program after each iteration's update (its centroids are then the iteration's):
  // set where the run is traced, empty otherwise.
  std::function<void()> after_iteration;
  void iterated() const {
    if (after_iteration) after_iteration();
  }
};

// Writes `values` as a C-ordered float64 .npy of shape (rows, k, d).
inline void write_npy(const std::string& path, const std::vector<double>& values, std::size_t rows, std::size_t k,
                      std::size_t d) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(k) + ", " + std::to_string(d) + "), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');  // the whole preamble a multiple of 64 bytes
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(header.size() & 0xff),
                                      (unsigned char)(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(preamble), 10);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(double)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

struct Options {
  std::string data, init, trace;
  long iterations = 300, warmup = 1, repeats = 5;
  double tol = -1;
  double shift_tol = -1;
  double max_time = 0;  // seconds of counted repeats after which to stop; 0: no budget
  long min_repeats = 1;  // counted repeats made whatever --max-time says
  bool single = false;  // compute in float32
};

inline Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--float32") { o.single = true; continue; }
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--data") o.data = value;
    else if (flag == "--init") o.init = value;
    else if (flag == "--iters") o.iterations = std::stol(value);
    else if (flag == "--warmup") o.warmup = std::stol(value);
    else if (flag == "--repeats") o.repeats = std::stol(value);
    else if (flag == "--max-time") o.max_time = std::stod(value);
    else if (flag == "--min-repeats") o.min_repeats = std::stol(value);
    else if (flag == "--tol") o.tol = std::stod(value);
    else if (flag == "--shift-tol") o.shift_tol = std::stod(value);
    else if (flag == "--trace") o.trace = value;
    else throw std::runtime_error("unknown option " + flag);
  }
  if (o.data.empty() || o.init.empty()) throw std::runtime_error("--data and --init are required");
  if (o.iterations < 1 || o.repeats < 1 || o.warmup < 0) throw std::runtime_error("bad iteration counts");
  if (o.tol > 1) throw std::runtime_error("--tol is a fraction of the points, at most 1");
  return o;
}

template <typename T>
std::vector<T> as(const Matrix& m) {
  return std::vector<T>(m.values.begin(), m.values.end());
}

// `extra`: more members of the document, already written as JSON (`"strategy": "..."`), or "".
inline void print_json(const std::vector<double>& centroids, std::size_t d, long iterations,
                       const std::vector<double>& times, const std::vector<double>& warmup,
                       const std::string& extra = "") {
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    char buf[40];
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%.17g", i ? ", " : "", v[i]);
      s += buf;
    }
    return s + "]";
  };
  std::string rows = "[";
  for (std::size_t c = 0; c * d < centroids.size(); ++c) {
    std::vector<double> row(centroids.begin() + c * d, centroids.begin() + (c + 1) * d);
    rows += (c ? ", " : "") + list(row);
  }
  rows += "]";
  std::printf("{\"centroids\": %s, \"iterations\": %ld, \"times\": %s, \"warmup_times\": %s%s%s}\n",
              rows.c_str(), iterations, list(times).c_str(), list(warmup).c_str(), extra.empty() ? "" : ", ",
              extra.c_str());
}

// The warm-up and the counted repeats: each run starts with `reset()` (untimed), then `once()`
// (timed with a steady clock, returning the iterations it executed); counting stops early once
// --max-time is spent and --min-repeats are done. Returns the last run's iterations.
template <typename Reset, typename Once>
long timed_runs(const Options& o, Reset&& reset, Once&& once, std::vector<double>& times,
                std::vector<double>& warmup) {
  long executed = 0;
  double spent = 0;
  for (long r = 0; r < o.warmup + o.repeats; ++r) {
    reset();
    const auto t0 = std::chrono::steady_clock::now();
    executed = once();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r < o.warmup) {
      warmup.push_back(seconds);
    } else {
      times.push_back(seconds);
      spent += seconds;
      if (o.max_time > 0 && spent > o.max_time && long(times.size()) >= o.min_repeats) break;
    }
  }
  return executed;
}

// The data and the initial centroids named by the options, checked against each other.
struct Inputs {
  Matrix data, init;
};

inline Inputs read_inputs(const Options& o) {
  Inputs in{read_npy(o.data), read_npy(o.init)};
  if (in.init.cols != in.data.cols) throw std::runtime_error("initial centroids and data differ in dimension");
  if (in.init.rows > in.data.rows) throw std::runtime_error("more centroids than points");
  return in;
}

// A program's main body, with any failure reported as one line on stderr and exit status 1.
template <typename Body>
int guarded(Body&& body) {
  try {
    body();
    return 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  return 1;
}

// Runs `lloyd(points, n, d, centroids, k, stop)` (which updates centroids in place and
// returns the iterations it executed) for the warm-up and the counted repeats, each from the
// initial centroids, timing only that call. `lloyd` is generic over the scalar type (float with --float32, else double).
template <typename Lloyd>
int main_with(int argc, char** argv, Lloyd&& lloyd) {
  return guarded([&] {
    const Options o = parse(argc, argv);
    const Inputs in = read_inputs(o);
    const Matrix &data = in.data, &init = in.init;
    std::vector<double> result;
    std::vector<double> times, warmup;
    long executed = 0;
    StopRule stop{o.iterations, o.tol};
    std::vector<double> trace;  // with --trace: every iteration's centroids, one after another
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const std::vector<T> points = as<T>(data);
      const std::vector<T> start = as<T>(init);
      std::vector<T> centroids;
      if (!o.trace.empty()) stop.after_iteration = [&] { trace.insert(trace.end(), centroids.begin(), centroids.end()); };
      executed = timed_runs(
          o, [&] { centroids = start; trace.clear(); },
          [&] { return lloyd(points, data.rows, data.cols, centroids, init.rows, stop); }, times, warmup);
      result.assign(centroids.begin(), centroids.end());
    };
    if (o.single) run(float{}); else run(double{});
    if (!o.trace.empty()) write_npy(o.trace, trace, trace.size() / (init.rows * data.cols), init.rows, data.cols);
    print_json(result, data.cols, executed, times, warmup);
  });
}

}  // namespace kmbench
