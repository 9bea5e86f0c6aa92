// kiln serve: the KServe v2 REST protocol over a model repository (src/serve/, docs/serving.md).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "core/strings.hpp"
#include "serve/model_repository.hpp"
#include "serve/server.hpp"

namespace kiln::cli {

using json = nlohmann::json;

int cmd_serve(const ServeOptions& o, const std::string& version) {
  // SIGTERM / SIGINT go to a watcher thread only (blocked before any other thread starts,
  // the models' stream workers included): it stops the server, which finishes the requests in
  // flight, refuses new ones and returns from listen().
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::mutex log_mutex;
  auto log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::cerr << line << "\n" << std::flush;
  };
  AnyMap defaults = {{"performance_mode", "THROUGHPUT"}};  // a server runs many requests at once
  for (auto& [k, v] : parse_property_specs(o.properties)) defaults[k] = v;
  const auto t0 = std::chrono::steady_clock::now();
  serve::ModelRepository repo(o.repository, defaults);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  serve::ServerOptions so;
  so.host = o.host;
  so.port = o.http_port;
  so.max_body_bytes = o.max_request_bytes;
  so.http_threads = o.http_threads;
  so.version = version;
  if (!o.quiet) so.log = log;
  serve::Server server(repo, so);
  server.bind();
  // events as JSON lines, names and paths escaped as JSON needs
  auto event = [&](json j) { log(j.dump(-1, ' ', false, json::error_handler_t::replace)); };
  for (const std::string& name : repo.names()) {
    const auto* m = repo.find(name);
    event({{"event", "model_ready"},
           {"model", name},
           {"path", m->path},
           {"streams", std::stoi(m->compiled.get_property("num_streams"))},
           {"precision", m->compiled.get_property("inference_precision")},
           {"model_cache", m->compiled.get_property("kiln_model_cache")}});
  }
  event({{"event", "listening"},
         {"address", cat("http://", o.host, ":", server.port())},
         {"models", repo.names().size()},
         {"load_seconds", load_s}});

  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 200 * 1000 * 1000};
    while (!done) {
      const int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig == SIGTERM || sig == SIGINT) {
        event({{"event", "shutting_down"}, {"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
        server.stop();
        return;
      }
    }
  });
  server.listen();
  done = true;
  watcher.join();
  event({{"event", "stopped"}});
  return 0;
}

}  // namespace kiln::cli
