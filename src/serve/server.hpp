#pragma once
// kiln serve: the KServe v2 (Open Inference Protocol) REST endpoints over a model repository,
// on cpp-httplib.
//   GET  /v2/health/live, /v2/health/ready
//   GET  /v2                                              server metadata
//   GET  /v2/models/<name>[/versions/<v>]                 model metadata
//   GET  /v2/models/<name>[/versions/<v>]/ready
//   POST /v2/models/<name>[/versions/<v>]/infer            JSON or binary tensors
//   GET  /metrics                                         Prometheus (metrics.hpp)
// Each model is served as version "1". An inference runs on the compiled model's streams
// (requests beyond them queue); the HTTP threads only decode, wait and encode. Every failure
// is a JSON body {"error": "..."}: 400 for a bad request, 404 for an unknown model or path,
// 413 for a body over the limit, 503 while shutting down, 500 for an internal error.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "serve/metrics.hpp"
#include "serve/model_repository.hpp"

namespace httplib {
class Server;
}

namespace kiln::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (see Server::port)
  size_t max_body_bytes = size_t(64) << 20;  // larger requests get 413
  int http_threads = 0;                  // 0: twice the streams of all models, at least 8
  std::string version;                   // reported by GET /v2
  std::function<void(const std::string&)> log;  // one JSON line per request (null: none)
};

class Server {
 public:
  Server(const ModelRepository& repo, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the port (throws kiln::Error when it cannot); then port() is the one bound.
  void bind();
  int port() const { return port_; }
  // Serves until stop(); in-flight requests finish before it returns.
  void listen();
  // From any thread (a signal watcher): refuse new requests (503), stop accepting connections.
  void stop();

 private:
  void routes();
  const ModelRepository& repo_;
  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace kiln::serve
