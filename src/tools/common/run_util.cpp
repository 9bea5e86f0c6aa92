#include "tools/common/run_util.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/dispatch.hpp"
#include "core/probe_dims.hpp"
#include "core/strings.hpp"
#include "tools/common/tensor_file.hpp"

namespace kiln::tools {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string input_names(const std::vector<PortInfo>& ports) {
  std::vector<std::string> names;
  for (const auto& p : ports) names.push_back(p.name);
  return join(names, ", ");
}

int find_port(const std::vector<PortInfo>& ports, const std::string& name) {
  for (size_t i = 0; i < ports.size(); ++i)
    if (ports[i].name == name) return static_cast<int>(i);
  return -1;
}

bool is_symbol(const std::vector<PortInfo>& ports, const std::string& name) {
  for (const auto& p : ports)
    for (size_t i = 0; i < p.shape.size(); ++i)
      if (p.shape[i] < 0 && i < p.dim_names.size() && p.dim_names[i] == name) return true;
  return false;
}

// Records the value of each symbolic dim of `port` seen in a concrete shape.
void bind_symbols(const PortInfo& port, const Shape& shape, std::map<std::string, int64_t>& symbols) {
  if (!port.rank_known || port.shape.size() != shape.size()) return;
  for (size_t i = 0; i < shape.size(); ++i)
    if (port.shape[i] < 0 && i < port.dim_names.size() && !port.dim_names[i].empty())
      symbols.emplace(port.dim_names[i], shape[i]);
}

// The sentence of PreparedInputs::defaulted_dims_hint: the dims (symbols, then unnamed ones)
// with the values they were given.
std::string hint_for(const std::vector<std::string>& defaulted_dims, const std::vector<std::string>& defaulted_unnamed,
                     const std::vector<int64_t>& values) {
  std::vector<std::string> names, give;
  for (const std::string& sym : defaulted_dims) {
    names.push_back(cat("'", sym, "'"));
    give.push_back(cat("--shape ", sym, "=N"));
  }
  for (const std::string& d : defaulted_unnamed) {
    names.push_back(cat("the unnamed ", d));
    give.push_back(cat("--shape ", d.substr(0, d.rfind(" dim ")), "=[d0,d1,...]"));
  }
  if (names.empty()) return "";
  std::vector<std::string> set;
  for (size_t i = 0; i < names.size(); ++i) set.push_back(cat(names[i], " = ", values.at(i)));
  std::sort(give.begin(), give.end());
  give.erase(std::unique(give.begin(), give.end()), give.end());
  const bool many = names.size() > 1;
  const bool probe = std::any_of(values.begin(), values.end(), [](int64_t v) { return v != 1; });
  return cat("no --shape gave the dynamic dim", many ? "s" : "", ", so ", join(set, ", "),
             probe ? " (compile_model's probe: a leading dim 1, an image's height and width 224, any other dim 64)" : "",
             "; give ", many ? "them" : "it", ": ", join(give, " "));
}

}  // namespace

PreparedInputs prepare_inputs(const std::vector<PortInfo>& ports, const std::vector<std::string>& input_specs,
                              const std::vector<std::string>& shape_specs, bool random_missing, uint32_t seed) {
  // --shape: per-input shapes or symbolic dim values.
  std::map<std::string, Shape> shapes;
  std::map<std::string, int64_t> symbols;
  for (const auto& spec : shape_specs) {
    auto [name, shape] = parse_shape_spec(spec);
    if (find_port(ports, name) >= 0) {
      KILN_CHECK(!shapes.count(name), cat("--shape given twice for input '", name, "'"));
      shapes[name] = shape;
    } else if (is_symbol(ports, name)) {
      KILN_CHECK(shape.size() == 1, cat("--shape '", spec, "': '", name, "' is a symbolic dim; give one value, e.g. ",
                                        name, "=4"));
      symbols[name] = shape[0];
    } else {
      throw Error(cat("--shape '", spec, "': the model has no input or symbolic dim named '", name,
                      "' (inputs: ", input_names(ports), ")"));
    }
  }

  // --input: files.
  PreparedInputs r;
  r.tensors.resize(ports.size());
  r.sources.resize(ports.size());
  std::error_code ec;
  for (const auto& spec : input_specs) {
    auto [name, file] = split_assignment(spec);
    int idx = name.empty() ? -1 : find_port(ports, name);
    if (idx < 0) {
      if (ports.size() == 1 && (name.empty() || std::filesystem::exists(spec, ec))) {
        idx = 0;
        file = spec;
      } else if (name.empty()) {
        throw Error(cat("--input '", spec, "': the model has ", ports.size(),
                        " inputs; give --input NAME=FILE (inputs: ", input_names(ports), ")"));
      } else {
        throw Error(cat("--input '", spec, "': the model has no input named '", name, "' (inputs: ",
                        input_names(ports), ")"));
      }
    }
    KILN_CHECK(!r.tensors[idx].defined(), cat("--input: input '", ports[idx].name, "' given twice"));
    r.tensors[idx] = load_tensor_file(file);
    r.sources[idx] = file;
    bind_symbols(ports[idx], r.tensors[idx].shape(), symbols);
  }
  for (size_t i = 0; i < ports.size(); ++i)
    if (!r.tensors[i].defined() && shapes.count(ports[i].name)) bind_symbols(ports[i], shapes[ports[i].name], symbols);

  // Missing inputs: random data or an error.
  std::vector<std::string> missing;
  for (size_t i = 0; i < ports.size(); ++i)
    if (!r.tensors[i].defined()) missing.push_back("'" + ports[i].name + "'");
  if (!missing.empty() && !random_missing)
    throw Error(cat("missing input", missing.size() > 1 ? "s " : " ", join(missing, ", "),
                    ": give --input NAME=FILE (.npy or .pb) or use --random-inputs"));
  std::mt19937 rng(seed);
  // The dynamic dims no --shape gave take probe_dim, compile_model's probe: a symbol the value of
  // its first defaulted place everywhere; as there, without image sizes where an input would
  // hold more than kProbeMaxElements with them.
  std::vector<Shape> defaulted(ports.size());
  std::map<std::string, int64_t> with_defaults;
  std::vector<int64_t> symbol_values, unnamed_values;
  for (const bool image_sizes : {true, false}) {
    with_defaults = symbols;
    symbol_values.clear();
    unnamed_values.clear();
    r.defaulted_dims.clear();
    r.defaulted_unnamed.clear();
    bool too_large = false;
    for (size_t i = 0; i < ports.size(); ++i) {
      if (r.tensors[i].defined()) continue;
      auto it = shapes.find(ports[i].name);
      if (it != shapes.end()) {
        defaulted[i] = it->second;
        continue;
      }
      defaulted[i] = concrete_shape(ports[i], with_defaults, image_sizes);
      too_large = too_large || exceeds_probe_elements(defaulted[i]);
      for (size_t d = 0; d < ports[i].shape.size(); ++d) {
        if (ports[i].shape[d] >= 0) continue;
        const std::string sym = d < ports[i].dim_names.size() ? ports[i].dim_names[d] : std::string();
        if (sym.empty()) {
          r.defaulted_unnamed.push_back(cat(ports[i].name, " dim ", d));
          unnamed_values.push_back(defaulted[i][d]);
        } else if (!symbols.count(sym) &&
                   std::find(r.defaulted_dims.begin(), r.defaulted_dims.end(), sym) == r.defaulted_dims.end()) {
          r.defaulted_dims.push_back(sym);
          symbol_values.push_back(defaulted[i][d]);
          with_defaults.emplace(sym, defaulted[i][d]);
        }
      }
    }
    if (!image_sizes || !too_large) break;
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    if (r.tensors[i].defined()) continue;
    KILN_CHECK(ports[i].dtype != DType::undefined,
               cat("input '", ports[i].name, "' has no declared element type; give it with --input"));
    r.tensors[i] = random_tensor(ports[i].name, ports[i].dtype, defaulted[i], rng);
    r.sources[i] = cat("random, seed ", seed);
  }
  symbol_values.insert(symbol_values.end(), unnamed_values.begin(), unnamed_values.end());
  r.defaulted_dims_hint = hint_for(r.defaulted_dims, r.defaulted_unnamed, symbol_values);
  return r;
}


std::string PreparedInputs::explain(const Error& e) const {
  return defaulted_dims_hint.empty() ? std::string(e.what()) : cat(e.what(), "\n  (", defaulted_dims_hint, ")");
}

std::pair<std::string, std::string> split_assignment(const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) return {"", spec};
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

std::vector<std::vector<std::string>> parse_data_shape(const std::string& spec, const std::vector<PortInfo>& ports) {
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;  // input -> its shapes, "[d0,...]"
  size_t pos = 0;
  const std::string where = cat("-data_shape '", spec, "'");
  while (pos < spec.size()) {
    const size_t open = spec.find('[', pos);
    KILN_CHECK(open != std::string::npos, cat(where, ": expected NAME[d0,d1,...] at '", spec.substr(pos), "'"));
    std::string name = trim(spec.substr(pos, open - pos));
    if (name.empty()) {
      KILN_CHECK(ports.size() == 1, cat(where, ": the model has ", ports.size(), " inputs; name each (inputs: ",
                                        input_names(ports), ")"));
      name = ports[0].name;
    }
    KILN_CHECK(find_port(ports, name) >= 0,
               cat(where, ": the model has no input named '", name, "' (inputs: ", input_names(ports), ")"));
    for (const auto& l : lists) KILN_CHECK(l.first != name, cat(where, ": input '", name, "' is given twice"));
    std::vector<std::string> shapes;
    pos = open;
    while (pos < spec.size() && spec[pos] == '[') {
      const size_t close = spec.find(']', pos);
      KILN_CHECK(close != std::string::npos, cat(where, ": missing ']'"));
      const std::string dims = spec.substr(pos, close - pos + 1);
      parse_shape_spec(cat(name, "=", dims));  // checks the dims now, naming them
      shapes.push_back(dims);
      pos = close + 1;
      while (pos < spec.size() && std::isspace(static_cast<unsigned char>(spec[pos]))) ++pos;
    }
    lists.emplace_back(name, std::move(shapes));
    if (pos < spec.size()) {
      KILN_CHECK(spec[pos] == ',', cat(where, ": expected ',' or '[' at '", spec.substr(pos), "'"));
      ++pos;
      KILN_CHECK(pos < spec.size(), cat(where, ": nothing after the last ','"));
    }
  }
  KILN_CHECK(!lists.empty(), cat(where, ": no shapes"));
  size_t groups = 1;
  for (const auto& l : lists) groups = std::max(groups, l.second.size());
  for (const auto& l : lists)
    KILN_CHECK(l.second.size() == 1 || l.second.size() == groups,
               cat(where, ": input '", l.first, "' has ", l.second.size(), " shapes, others ", groups,
                   " (give each input one shape or as many as the others)"));
  std::vector<std::vector<std::string>> out(groups);
  for (size_t g = 0; g < groups; ++g)
    for (const auto& l : lists) out[g].push_back(cat(l.first, "=", l.second[l.second.size() == 1 ? 0 : g]));
  return out;
}

std::pair<std::string, Shape> parse_shape_spec(const std::string& spec) {
  auto [name, value] = split_assignment(spec);
  KILN_CHECK(!name.empty(), cat("--shape '", spec, "': expected NAME=[d0,d1,...]"));
  std::string v = trim(value);
  if (!v.empty() && v.front() == '[') {
    KILN_CHECK(v.back() == ']', cat("--shape '", spec, "': missing ']'"));
    v = v.substr(1, v.size() - 2);
  }
  Shape shape;
  if (trim(v).empty()) return {name, shape};
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    std::string tok = trim(v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    KILN_CHECK(!tok.empty() && tok.size() <= 12 && tok.find_first_not_of("0123456789") == std::string::npos,
               cat("--shape '", spec, "': '", tok, "' is not a non-negative dimension"));
    shape.push_back(std::stoll(tok));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return {name, shape};
}

Shape concrete_shape(const PortInfo& port, const std::map<std::string, int64_t>& symbols, bool image_sizes) {
  KILN_CHECK(port.rank_known, cat("input '", port.name, "' has an unknown rank: give its shape with --shape ",
                                  port.name, "=[d0,d1,...]"));
  Shape s;
  for (size_t i = 0; i < port.shape.size(); ++i) {
    if (port.shape[i] >= 0) {
      s.push_back(port.shape[i]);
      continue;
    }
    const std::string& sym = i < port.dim_names.size() ? port.dim_names[i] : std::string();
    auto it = sym.empty() ? symbols.end() : symbols.find(sym);
    s.push_back(it != symbols.end() ? it->second : probe_dim(port.shape.size(), i, image_sizes));
  }
  return s;
}

Tensor random_tensor(const std::string& name, DType dtype, const Shape& shape, std::mt19937& rng) {
  Tensor t(dtype, shape);
  const int64_t n = t.size();
  if (dtype == DType::boolean) {
    bool* p = t.data<bool>();
    std::bernoulli_distribution d(0.5);
    for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
    return t;
  }
  if (is_floating(dtype)) {
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    dispatch_float(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = t.data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = T(d(rng));
    }, "random input");
    return t;
  }
  const std::string lname = lower(name);
  int64_t lo = 0, hi = 10;  // [lo, hi)
  if (lname.find("mask") != std::string::npos) lo = 1, hi = 2;
  else if (lname.find("type_ids") != std::string::npos || lname.find("segment") != std::string::npos) hi = 2;
  else if (lname.find("ids") != std::string::npos) hi = 100;
  else if (dtype == DType::u8) hi = 256;
  std::uniform_int_distribution<int64_t> d(lo, hi - 1);
  dispatch_int(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(rng));
  }, "random input");
  return t;
}

TensorStats tensor_stats(const Tensor& t) {
  TensorStats s;
  s.count = t.size();
  if (s.count == 0) return s;
  double mn = std::numeric_limits<double>::infinity(), mx = -mn, sum = 0;
  int64_t finite_or_inf = 0;
  auto visit = [&](double v) {
    if (std::isnan(v)) {
      ++s.nan;
      return;
    }
    if (std::isinf(v)) ++s.inf;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
    ++finite_or_inf;
  };
  dispatch_all(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (int64_t i = 0; i < s.count; ++i) visit(static_cast<double>(p[i]));
  }, "tensor summary");
  if (finite_or_inf > 0) {
    s.min = mn;
    s.max = mx;
    s.mean = sum / static_cast<double>(finite_or_inf);
  }
  return s;
}

std::string summarize_tensor(const std::string& name, const Tensor& t) {
  if (t.kind() == ValueKind::sequence) {
    std::string out = cat(name, "  sequence of ", t.items().size(), " ", dtype_name(t.dtype()), " tensors");
    for (size_t i = 0; i < t.items().size() && i < 4; ++i) out += cat(i ? ", " : ": ", shape_to_string(t.items()[i].shape()));
    return out + (t.items().size() > 4 ? ", ..." : "");
  }
  if (t.kind() == ValueKind::optional)
    return t.items().empty() ? cat(name, "  optional ", dtype_name(t.dtype()), ": none")
                             : summarize_tensor(cat(name, " (optional)"), t.items()[0]);
  std::string out = cat(name, "  ", shape_to_string(t.shape()), "  ", dtype_name(t.dtype()));
  if (t.dtype() == DType::string) {
    for (int64_t i = 0; i < t.size() && i < 4; ++i) out += cat(i ? ", \"" : "  \"", t.data<std::string>()[i], "\"");
    return out + (t.size() > 4 ? ", ..." : t.size() == 0 ? "  (empty)" : "");
  }
  TensorStats s = tensor_stats(t);
  if (s.count == 0) return out + "  (empty)";
  if (s.nan == s.count) return out + cat("  all NaN (", s.nan, ")");
  out += cat("  min=", fmt(s.min), " max=", fmt(s.max), " mean=", fmt(s.mean));
  if (s.nan) out += cat("  nan=", s.nan);
  if (s.inf) out += cat("  inf=", s.inf);
  return out;
}

std::string sanitize_file_name(const std::string& name) {
  std::string r = name;
  for (char& c : r) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '.' || c == '-' || c == '_')) c = '_';
  }
  if (r.empty() || r == "." || r == "..") r = "_" + r;
  return r;
}

LatencyStats latency_stats(std::vector<double> ms) {
  LatencyStats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  s.min = ms.front();
  s.max = ms.back();
  s.median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90 = ms[std::min(n, std::max<size_t>(rank, 1)) - 1];
  for (double v : ms) s.total += v;
  s.mean = s.total / static_cast<double>(n);
  return s;
}

namespace {
double status_mib(const char* key) {  // a "Key:  N kB" line of /proc/self/status, in MiB; -1 if absent
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) != 0) continue;
    long long kib = 0;
    if (std::sscanf(line.c_str() + n, "%lld", &kib) == 1) return static_cast<double>(kib) / 1024.0;
  }
  return -1;
}
}  // namespace

double peak_rss_mib() { return status_mib("VmHWM:"); }
double rss_mib() { return status_mib("VmRSS:"); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

}  // namespace kiln::tools
