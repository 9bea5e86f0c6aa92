// kiln_conformance: runs the ONNX backend test suite (Debian's libonnx-testdata) through
// kiln's public API and compares every output with the reference.
//
//   kiln_conformance [--root DIR] [--filter REGEX] [--expected FILE] [--write-passing FILE]
//                    [--verbose] [--timeout SECONDS]
//
// Each case runs in a forked child so that a crash or a hang is reported as a failure
// of that case (and fails the run) instead of taking the driver down. Comparison:
// |expected - actual| <= atol + rtol * |expected| (rtol 1e-3, atol 1e-5), integers and
// bools exactly, NaN matches NaN. A case whose model uses an op or type kiln does not
// support is skipped with the reason. With --expected, every case listed in FILE must
// pass, else the exit code is 1 (the regression gate used by ctest).
#include <kiln/core.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/dispatch.hpp"
#include "frontend/onnx/tensor_proto.hpp"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

struct Outcome {
  enum Kind { pass, fail, skip } kind = fail;
  std::string reason;
};

bool is_unsupported(const std::string& msg) {
  return msg.find("unsupported op") != std::string::npos || msg.find("not supported") != std::string::npos;
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

std::string compare(const Tensor& expected, const Tensor& actual, const std::string& name) {
  std::ostringstream os;
  if (expected.kind() != ValueKind::tensor || actual.kind() != ValueKind::tensor) {  // sequences, optionals
    if (expected.kind() != actual.kind()) return "output '" + name + "': a different kind of value";
    if (expected.items().size() != actual.items().size())
      return "output '" + name + "': " + std::to_string(actual.items().size()) + " items, expected " +
             std::to_string(expected.items().size());
    for (size_t i = 0; i < expected.items().size(); ++i) {
      std::string d = compare(expected.items()[i], actual.items()[i], name + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
    return "";
  }
  if (expected.dtype() != actual.dtype()) {
    os << "output '" << name << "': dtype " << dtype_name(actual.dtype()) << ", expected " << dtype_name(expected.dtype());
    return os.str();
  }
  if (expected.shape() != actual.shape()) {
    os << "output '" << name << "': shape " << shape_to_string(actual.shape()) << ", expected "
       << shape_to_string(expected.shape());
    return os.str();
  }
  if (expected.dtype() == DType::string) {
    for (int64_t i = 0; i < expected.size(); ++i)
      if (expected.data<std::string>()[i] != actual.data<std::string>()[i]) {
        os << "output '" << name << "' [" << i << "]: \"" << actual.data<std::string>()[i] << "\", expected \""
           << expected.data<std::string>()[i] << "\"";
        return os.str();
      }
    return "";
  }
  bool exact = !is_floating(expected.dtype());
  auto e = expected.to_f64(), a = actual.to_f64();
  if (exact && (expected.dtype() == DType::i64 || expected.dtype() == DType::u64)) {
    auto ei = expected.to_i64(), ai = actual.to_i64();
    for (size_t i = 0; i < ei.size(); ++i)
      if (ei[i] != ai[i]) {
        os << "output '" << name << "' [" << i << "]: " << ai[i] << ", expected " << ei[i];
        return os.str();
      }
    return "";
  }
  for (size_t i = 0; i < e.size(); ++i) {
    double x = e[i], y = a[i];
    bool ok;
    if (std::isnan(x)) ok = std::isnan(y);
    else if (exact) ok = x == y;
    else if (std::isinf(x)) ok = x == y;
    else ok = std::fabs(x - y) <= kAtol + kRtol * std::fabs(x);
    if (!ok) {
      os << "output '" << name << "' [" << i << "]: " << y << ", expected " << x;
      return os.str();
    }
  }
  return "";
}

// The ONNX 1.12 test data stores bfloat16 tensors with data type UINT16 (the bit
// patterns); read them as bf16 where the model declares bf16.
Tensor as_declared(Tensor t, DType declared) {
  if (declared == DType::bf16 && t.dtype() == DType::u16) return Tensor::wrap(DType::bf16, t.shape(), t.raw()).clone();
  return t;
}

Outcome run_case(const fs::path& dir) {
  Outcome o;
  try {
    Core core;
    auto model = core.read_model((dir / "model.onnx").string());
    // the reference outputs are f32 computations: not the bf16 default of CPUs with native bf16
    auto compiled = core.compile_model(model, {{"inference_precision", "f32"}});
    std::vector<fs::path> sets;
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return {Outcome::skip, "no test data"};
    for (auto& set : sets) {
      auto ins = numbered(set, "input_");
      auto outs = numbered(set, "output_");
      auto req = compiled.create_infer_request();
      if (ins.size() != model->inputs().size()) {
        return {Outcome::fail, "test data has " + std::to_string(ins.size()) + " inputs, model has " +
                                   std::to_string(model->inputs().size())};
      }
      for (size_t i = 0; i < ins.size(); ++i) {
        const PortInfo& p = model->inputs()[i];
        req.set_input_tensor(
            i, as_declared(frontend::value_from_proto_file(ins[i].string(), p.kind, p.dtype, p.element_kind), p.dtype));
      }
      req.infer();
      if (outs.size() != model->outputs().size())
        return {Outcome::fail, "test data has " + std::to_string(outs.size()) + " outputs, model has " +
                                   std::to_string(model->outputs().size())};
      for (size_t i = 0; i < outs.size(); ++i) {
        const PortInfo& p = model->outputs()[i];
        Tensor expected =
            as_declared(frontend::value_from_proto_file(outs[i].string(), p.kind, p.dtype, p.element_kind), p.dtype);
        std::string diff = compare(expected, req.get_output_tensor(i), model->outputs()[i].name);
        if (!diff.empty()) return {Outcome::fail, set.filename().string() + ": " + diff};
      }
    }
    return {Outcome::pass, ""};
  } catch (const Error& e) {
    std::string msg = e.what();
    return {is_unsupported(msg) ? Outcome::skip : Outcome::fail, msg};
  } catch (const std::exception& e) {
    return {Outcome::fail, std::string("non-kiln exception: ") + e.what()};
  }
}

// Runs one case in a child process; crashes and time-outs become failures.
Outcome run_isolated(const fs::path& dir, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return run_case(dir);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    Outcome o = run_case(dir);
    std::string msg = std::to_string(static_cast<int>(o.kind)) + o.reason;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {Outcome::fail, sig == SIGALRM ? "TIMEOUT after " + std::to_string(timeout_s) + " s"
                                          : "CRASH: killed by signal " + std::to_string(sig)};
  }
  if (msg.empty()) return {Outcome::fail, "CRASH: the case exited without a result"};
  Outcome o;
  o.kind = static_cast<Outcome::Kind>(msg[0] - '0');
  o.reason = msg.substr(1);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = "/usr/share/libonnx-testdata/data";
  std::string filter = ".*", expected_file, write_passing;
  bool verbose = false;
  int timeout_s = 120;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "missing value for " << a << "\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--root") root = next();
    else if (a == "--filter") filter = next();
    else if (a == "--expected") expected_file = next();
    else if (a == "--write-passing") write_passing = next();
    else if (a == "--timeout") timeout_s = std::stoi(next());
    else if (a == "--verbose" || a == "-v") verbose = true;
    else {
      std::cerr << "usage: kiln_conformance [--root DIR] [--filter REGEX] [--expected FILE] "
                   "[--write-passing FILE] [--timeout S] [--verbose]\n";
      return 2;
    }
  }
  if (!fs::is_directory(root)) {
    std::cerr << "kiln_conformance: test data not found at " << root << " (apt-get install libonnx-testdata)\n";
    return 1;
  }
  std::regex re(filter);
  std::vector<std::string> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path sd = fs::path(root) / suite;
    if (!fs::is_directory(sd)) continue;
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(sd))
      if (fs::exists(e.path() / "model.onnx")) names.push_back(std::string(suite) + "/" + e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (auto& n : names)
      if (std::regex_search(n, re)) cases.push_back(n);
  }
  std::set<std::string> expected;
  if (!expected_file.empty()) {
    std::ifstream f(expected_file);
    if (!f) {
      std::cerr << "kiln_conformance: cannot read " << expected_file << "\n";
      return 1;
    }
    for (std::string line; std::getline(f, line);)
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  int passed = 0, failed = 0, skipped = 0, crashed = 0;
  std::vector<std::string> regressions, passing;
  std::map<std::string, int> skip_reasons;
  for (auto& c : cases) {
    Outcome o = run_isolated(fs::path(root) / c, timeout_s);
    if (o.reason.rfind("CRASH", 0) == 0 || o.reason.rfind("TIMEOUT", 0) == 0) ++crashed;
    switch (o.kind) {
      case Outcome::pass:
        ++passed;
        passing.push_back(c);
        if (verbose) std::cout << "PASS " << c << "\n";
        break;
      case Outcome::fail:
        ++failed;
        std::cout << "FAIL " << c << ": " << o.reason << "\n";
        break;
      case Outcome::skip:
        ++skipped;
        std::cout << "SKIP " << c << ": " << o.reason << "\n";
        break;
    }
    if (o.kind != Outcome::pass && expected.count(c)) regressions.push_back(c);
  }
  if (!write_passing.empty()) {
    std::ofstream f(write_passing);
    f << "# ONNX backend test cases that kiln passes; kiln_conformance --expected fails if one stops passing.\n";
    for (auto& p : passing) f << p << "\n";
  }
  int ret = 0;
  if (!regressions.empty()) {
    std::cout << "\nREGRESSIONS (" << regressions.size() << " cases in the expected-pass list no longer pass):\n";
    for (auto& r : regressions) std::cout << "  " << r << "\n";
    ret = 1;
  }
  if (crashed) {
    std::cout << "\n" << crashed << " cases crashed or timed out\n";
    ret = 1;
  }
  std::cout << "\nconformance: " << passed << " passed, " << failed << " failed, " << skipped << " skipped (of "
            << cases.size() << " cases)\n";
  return ret;
}
