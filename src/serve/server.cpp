#include "serve/server.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <charconv>

#include "core/strings.hpp"
#include "serve/kserve_codec.hpp"

namespace kiln::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void reply_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_body(message), "application/json");
}

json port_json(const PortInfo& p) {
  json shape = json::array();
  if (p.rank_known)
    for (int64_t d : p.shape) shape.push_back(d);  // -1: any size
  else
    shape.push_back(-1);
  std::string datatype = datatype_of(p.dtype);
  return {{"name", p.name}, {"datatype", datatype.empty() ? dtype_name(p.dtype) : datatype}, {"shape", shape}};
}

// The model named in the path, or a 404 answered and null. `version` (may be empty) must be "1".
const ServedModel* model_of(const ModelRepository& repo, const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  const std::string version = req.matches.size() > 2 ? std::string(req.matches[2]) : "";
  const ServedModel* m = repo.find(name);
  if (!m) {
    reply_error(res, 404, cat("unknown model '", name, "'; served: ", join(repo.names(), ", ")));
    return nullptr;
  }
  if (!version.empty() && version != "1") {
    reply_error(res, 404, cat("model '", name, "' has no version '", version, "'; its version is 1"));
    return nullptr;
  }
  return m;
}

// Inference-Header-Content-Length: a decimal byte count, or nullopt when absent.
std::optional<size_t> header_length(const httplib::Request& req) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw RequestError(cat("Inference-Header-Content-Length '", v, "' is not a byte count"));
  return n;
}

}  // namespace

Server::Server(const ModelRepository& repo, ServerOptions options)
    : repo_(repo), options_(std::move(options)), metrics_(repo.names()), http_(std::make_unique<httplib::Server>()) {
  int streams = 0;
  for (const std::string& n : repo_.names()) streams += std::stoi(repo_.find(n)->compiled.get_property("num_streams"));
  const int threads = options_.http_threads > 0 ? options_.http_threads : std::max(8, 2 * streams);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  routes();
}

Server::~Server() = default;

void Server::routes() {
  httplib::Server& s = *http_;
  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"live", true}}.dump(), "application/json");
  });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (stopping_) return reply_error(res, 503, "shutting down");
    res.set_content(json{{"ready", true}}.dump(), "application/json");
  });
  s.Get("/v2", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"name", "kiln"}, {"version", options_.version}, {"extensions", {"binary_tensor_data"}}}.dump(),
                    "application/json");
  });
  const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  s.Get(model, [this](const httplib::Request& req, httplib::Response& res) {
    const ServedModel* m = model_of(repo_, req, res);
    if (!m) return;
    json j{{"name", m->name}, {"versions", {"1"}}, {"platform", "onnx"}, {"inputs", json::array()}, {"outputs", json::array()}};
    for (const PortInfo& p : m->compiled.inputs()) j["inputs"].push_back(port_json(p));
    for (const PortInfo& p : m->compiled.outputs()) j["outputs"].push_back(port_json(p));
    res.set_content(j.dump(), "application/json");
  });
  s.Get(model + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    const ServedModel* m = model_of(repo_, req, res);
    if (!m) return;
    if (stopping_) return reply_error(res, 503, "shutting down");
    res.set_content(json{{"name", m->name}, {"ready", true}}.dump(), "application/json");
  });
  s.Post(model + "/infer", [this](const httplib::Request& req, httplib::Response& res) {
    const auto t0 = Clock::now();
    const ServedModel* m = model_of(repo_, req, res);
    if (!m) return;
    double infer_s = -1;
    bool ok = false;
    if (stopping_) {
      reply_error(res, 503, "shutting down");
    } else {
      try {
        const InferRequestData in =
            decode_infer_request(req.body, header_length(req), m->compiled.inputs(), m->compiled.outputs());
        InferRequest r = m->compiled.create_infer_request();
        for (size_t i = 0; i < in.inputs.size(); ++i) r.set_input_tensor(i, in.inputs[i].tensor);
        const auto t1 = Clock::now();
        r.infer();
        infer_s = seconds_since(t1);
        std::vector<std::pair<std::string, Tensor>> outs;
        const auto& ports = m->compiled.outputs();
        for (size_t i = 0; i < ports.size(); ++i) outs.emplace_back(ports[i].name, r.get_output_tensor(i));
        const InferResponseData out = encode_infer_response(m->name, in, outs);
        if (out.header_length) {
          res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
          res.set_content(out.body, "application/octet-stream");
        } else {
          res.set_content(out.body, "application/json");
        }
        ok = true;
      } catch (const RequestError& e) {
        reply_error(res, e.status(), e.what());
      } catch (const Error& e) {
        // the inference refused these inputs (a value out of range, a shape the model cannot
        // take): the client's to fix, unless kiln reports an internal error
        const std::string what = e.what();
        reply_error(res, what.rfind("internal error", 0) == 0 ? 500 : 400, what);
      }
    }
    metrics_.record(m->name, ok, seconds_since(t0), infer_s);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(), "text/plain; version=0.0.4");
  });
  // Errors without a body (unknown path, method not allowed, body too large): JSON too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404: message = cat("no such endpoint: ", req.method, " ", req.path); break;
      case 405: message = cat("method ", req.method, " not allowed on ", req.path); break;
      case 413: message = "the request body is larger than the server's limit (--max-request-bytes)"; break;
      default: message = cat("HTTP ", res.status);
    }
    res.set_content(error_body(message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    reply_error(res, 500, cat("internal error: ", what));
  });
  if (options_.log)
    s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      options_.log(json{{"method", req.method},
                        {"path", req.path},
                        {"status", res.status},
                        {"remote", req.remote_addr},
                        {"request_bytes", req.body.size()},
                        {"response_bytes", res.body.size()}}
                       .dump(-1, ' ', false, json::error_handler_t::replace));
    });
}

void Server::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) throw Error(cat("cannot bind a port on ", options_.host));
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      throw Error(cat("cannot bind ", options_.host, ":", options_.port, " (in use, or not an address of this machine?)"));
    port_ = options_.port;
  }
}

void Server::listen() { http_->listen_after_bind(); }

void Server::stop() {
  stopping_ = true;
  http_->stop();
}

}  // namespace kiln::serve
