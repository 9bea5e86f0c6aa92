#include "serve/metrics.hpp"

#include <sstream>

#include "core/strings.hpp"

namespace kiln::serve {

namespace {

// Seconds: 0.5 ms to 10 s.
constexpr double kBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
constexpr size_t kNumBuckets = sizeof(kBuckets) / sizeof(kBuckets[0]);

// A label value as Prometheus wants it: backslash, double quote and newline escaped.
std::string label(const std::string& s) { return escape_quotes(s); }

}  // namespace

void Metrics::Histogram::add(double v) {
  if (counts.empty()) counts.assign(kNumBuckets + 1, 0);
  size_t b = 0;
  while (b < kNumBuckets && v > kBuckets[b]) ++b;
  ++counts[b];
  sum += v;
  ++count;
}

Metrics::Metrics(const std::vector<std::string>& models) {
  for (const std::string& m : models) models_[m];
}

void Metrics::record(const std::string& model, bool ok, double request_seconds, double infer_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = models_.find(model);
  if (it == models_.end()) return;  // an unknown model's requests are not a series of their own
  PerModel& m = it->second;
  ++m.requests;
  if (!ok) ++m.failures;
  m.request.add(request_seconds);
  if (infer_seconds >= 0) m.infer.add(infer_seconds);
}

std::string Metrics::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream os;
  os << "# HELP kiln_requests_total Inference requests received, by model.\n# TYPE kiln_requests_total counter\n";
  for (const auto& [name, m] : models_) os << "kiln_requests_total{model=\"" << label(name) << "\"} " << m.requests << "\n";
  os << "# HELP kiln_request_failures_total Inference requests answered with an error, by model.\n"
        "# TYPE kiln_request_failures_total counter\n";
  for (const auto& [name, m] : models_)
    os << "kiln_request_failures_total{model=\"" << label(name) << "\"} " << m.failures << "\n";
  auto histogram = [&](const char* metric, const char* help, Histogram PerModel::*h) {
    os << "# HELP " << metric << " " << help << "\n# TYPE " << metric << " histogram\n";
    for (const auto& [name, m] : models_) {
      const Histogram& hist = m.*h;
      uint64_t cumulative = 0;
      for (size_t b = 0; b <= kNumBuckets; ++b) {
        cumulative += hist.counts.empty() ? 0 : hist.counts[b];
        os << metric << "_bucket{model=\"" << label(name) << "\",le=\"";
        if (b < kNumBuckets) os << kBuckets[b];
        else os << "+Inf";
        os << "\"} " << cumulative << "\n";
      }
      os << metric << "_sum{model=\"" << label(name) << "\"} " << hist.sum << "\n";
      os << metric << "_count{model=\"" << label(name) << "\"} " << hist.count << "\n";
    }
  };
  histogram("kiln_request_duration_seconds", "Time from receiving an inference request to its answer, by model.",
            &PerModel::request);
  histogram("kiln_inference_duration_seconds",
            "Time an inference took, waiting for a free stream included, by model.", &PerModel::infer);
  return os.str();
}

}  // namespace kiln::serve
