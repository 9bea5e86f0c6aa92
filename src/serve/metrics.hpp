#pragma once
// Prometheus metrics of a server (text exposition format 0.0.4, served at /metrics): per
// model, requests and failed requests, and histograms of the request time (receipt to
// response, as the server sees it) and of the inference time (InferRequest::infer: waiting for
// a free stream, then running). Thread-safe.
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::serve {

class Metrics {
 public:
  explicit Metrics(const std::vector<std::string>& models);
  // One finished infer request: `ok` false for any 4xx / 5xx answer; `infer_seconds` < 0 when
  // it failed before inference.
  void record(const std::string& model, bool ok, double request_seconds, double infer_seconds);
  std::string text() const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket of kBuckets, then +Inf
    double sum = 0;
    uint64_t count = 0;
    void add(double v);
  };
  struct PerModel {
    uint64_t requests = 0, failures = 0;
    Histogram request, infer;
  };
  mutable std::mutex mutex_;
  std::map<std::string, PerModel> models_;
};

}  // namespace kiln::serve
