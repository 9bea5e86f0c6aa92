#include "serve/kserve_codec.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/strings.hpp"

namespace kiln::serve {

using json = nlohmann::json;

namespace {

struct DatatypeName {
  const char* name;
  DType dtype;
};
constexpr DatatypeName kDatatypes[] = {
    {"BOOL", DType::boolean}, {"UINT8", DType::u8},   {"UINT16", DType::u16}, {"UINT32", DType::u32},
    {"UINT64", DType::u64},   {"INT8", DType::i8},    {"INT16", DType::i16},  {"INT32", DType::i32},
    {"INT64", DType::i64},    {"FP16", DType::f16},   {"FP32", DType::f32},   {"FP64", DType::f64},
    {"BF16", DType::bf16},    {"BYTES", DType::string},
};

[[noreturn]] void bad(const std::string& what) { throw RequestError(what); }

// The dims of a request's "shape": non-negative integers, at most 2^40 elements in all.
Shape parse_shape(const json& j, const std::string& where) {
  if (!j.is_array()) bad(cat(where, ": \"shape\" must be an array of non-negative integers"));
  Shape s;
  long double elements = 1;
  for (const json& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      bad(cat(where, ": \"shape\" must be an array of non-negative integers, got ", d.dump()));
    s.push_back(d.get<int64_t>());
    elements *= static_cast<long double>(s.back());
  }
  if (elements > static_cast<long double>(int64_t(1) << 40)) bad(cat(where, ": shape ", shape_to_string(s), " is too large"));
  return s;
}

// Row-major elements of "data", flat or nested to any depth.
void flatten(const json& j, std::vector<const json*>& out, const std::string& where, int depth = 0) {
  if (depth > 64) bad(cat(where, ": \"data\" is nested too deep"));
  if (j.is_array()) {
    for (const json& e : j) flatten(e, out, where, depth + 1);
  } else {
    out.push_back(&j);
  }
}

template <typename T>
void store_integer(const json& v, char* dst, const std::string& where) {
  bool ok = false;
  T x{};
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    x = static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    ok = std::is_signed_v<T> ? (i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                i <= static_cast<int64_t>(std::numeric_limits<T>::max()))
                             : (i >= 0 && static_cast<uint64_t>(i) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
    x = static_cast<T>(i);
  }
  if (!ok) bad(cat(where, ": ", v.dump(), " is not a value of the input's integer type"));
  std::memcpy(dst, &x, sizeof(T));
}

// One JSON element into the tensor's i-th slot.
void store(const json& v, Tensor& t, size_t i, const std::string& where) {
  char* dst = static_cast<char*>(t.raw()) + i * dtype_size(t.dtype());
  auto number = [&]() -> double {
    if (!v.is_number()) bad(cat(where, ": ", v.dump(), " is not a number"));
    return v.get<double>();
  };
  switch (t.dtype()) {
    case DType::boolean:
      if (!v.is_boolean()) bad(cat(where, ": ", v.dump(), " is not true or false"));
      *dst = v.get<bool>() ? 1 : 0;
      return;
    case DType::u8: return store_integer<uint8_t>(v, dst, where);
    case DType::u16: return store_integer<uint16_t>(v, dst, where);
    case DType::u32: return store_integer<uint32_t>(v, dst, where);
    case DType::u64: return store_integer<uint64_t>(v, dst, where);
    case DType::i8: return store_integer<int8_t>(v, dst, where);
    case DType::i16: return store_integer<int16_t>(v, dst, where);
    case DType::i32: return store_integer<int32_t>(v, dst, where);
    case DType::i64: return store_integer<int64_t>(v, dst, where);
    case DType::f32: {
      const float f = static_cast<float>(number());
      std::memcpy(dst, &f, 4);
      return;
    }
    case DType::f64: {
      const double d = number();
      std::memcpy(dst, &d, 8);
      return;
    }
    case DType::f16: {
      const float16 h(static_cast<float>(number()));
      std::memcpy(dst, &h, 2);
      return;
    }
    case DType::bf16: {
      const bfloat16 b(static_cast<float>(number()));
      std::memcpy(dst, &b, 2);
      return;
    }
    case DType::string:
      if (!v.is_string()) bad(cat(where, ": ", v.dump(), " is not a string"));
      t.data<std::string>()[i] = v.get<std::string>();
      return;
    default:
      bad(cat(where, ": datatype not supported"));
  }
}

// The tensor of one input from the bytes of the binary extension.
void fill_binary(Tensor& t, const char* p, size_t n, const std::string& where) {
  if (t.dtype() != DType::string) {
    if (n != t.byte_size())
      bad(cat(where, ": binary_data_size is ", n, " bytes, the shape and datatype need ", t.byte_size()));
    if (n) std::memcpy(t.raw(), p, n);
    if (t.dtype() == DType::boolean)
      for (size_t i = 0; i < n; ++i)
        if (static_cast<unsigned char>(p[i]) > 1) bad(cat(where, ": BOOL byte ", i, " is not 0 or 1"));
    return;
  }
  // BYTES: each element a 4-byte little-endian length, then that many bytes
  size_t at = 0;
  std::string* out = t.data<std::string>();
  for (int64_t i = 0; i < t.size(); ++i) {
    if (n - at < 4) bad(cat(where, ": binary BYTES data ends inside the length of element ", i));
    uint32_t len = 0;
    for (int b = 3; b >= 0; --b) len = (len << 8) | static_cast<unsigned char>(p[at + static_cast<size_t>(b)]);
    at += 4;
    if (n - at < len) bad(cat(where, ": binary BYTES element ", i, " needs ", len, " bytes, ", n - at, " are left"));
    out[i].assign(p + at, len);
    at += len;
  }
  if (at != n) bad(cat(where, ": binary_data_size is ", n, " bytes, the elements take ", at));
}

bool param_bool(const json& obj, const char* key, const std::string& where) {
  auto params = obj.find("parameters");
  if (params == obj.end()) return false;
  if (!params->is_object()) bad(cat(where, ": \"parameters\" must be an object"));
  auto it = params->find(key);
  if (it == params->end()) return false;
  if (!it->is_boolean()) bad(cat(where, ": parameter \"", key, "\" must be true or false"));
  return it->get<bool>();
}

}  // namespace

std::optional<DType> dtype_from_datatype(const std::string& datatype) {
  for (const auto& d : kDatatypes)
    if (datatype == d.name) return d.dtype;
  return std::nullopt;
}

std::string datatype_of(DType t) {
  for (const auto& d : kDatatypes)
    if (d.dtype == t) return d.name;
  return "";
}

InferRequestData decode_infer_request(const std::string& body, std::optional<size_t> header_length,
                                      const std::vector<PortInfo>& ports, const std::vector<PortInfo>& outputs) {
  if (header_length && *header_length > body.size())
    bad(cat("Inference-Header-Content-Length is ", *header_length, " but the body has ", body.size(), " bytes"));
  const size_t json_end = header_length ? *header_length : body.size();
  json j;
  try {
    j = json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(json_end));
  } catch (const json::exception& e) {
    bad(cat("the request is not valid JSON: ", e.what()));
  }
  if (!j.is_object()) bad("the request must be a JSON object with \"inputs\"");
  InferRequestData r;
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_string()) bad("\"id\" must be a string");
    r.id = id->get<std::string>();
  }
  r.binary_output = param_bool(j, "binary_data_output", "request");
  auto ins = j.find("inputs");
  if (ins == j.end() || !ins->is_array()) bad("the request needs \"inputs\": an array of tensors");

  std::vector<std::optional<Tensor>> by_port(ports.size());
  size_t binary_at = json_end;  // next unread byte of the binary part
  for (size_t k = 0; k < ins->size(); ++k) {
    const json& in = (*ins)[k];
    std::string where = cat("inputs[", k, "]");
    if (!in.is_object()) bad(cat(where, " must be an object"));
    auto name = in.find("name");
    if (name == in.end() || !name->is_string()) bad(cat(where, ": \"name\" must be a string"));
    const std::string n = name->get<std::string>();
    where = cat("input '", n, "'");
    size_t port = ports.size();
    for (size_t p = 0; p < ports.size(); ++p)
      if (ports[p].name == n) port = p;
    if (port == ports.size()) {
      std::vector<std::string> names;
      for (const auto& p : ports) names.push_back(p.name);
      bad(cat(where, ": the model has no such input; its inputs: ", join(names, ", ")));
    }
    if (by_port[port]) bad(cat(where, " is given twice"));
    const PortInfo& info = ports[port];
    if (info.kind != ValueKind::tensor) bad(cat(where, ": a sequence or optional input; the protocol sends tensors"));
    auto dt = in.find("datatype");
    if (dt == in.end() || !dt->is_string()) bad(cat(where, ": \"datatype\" must be a string such as \"FP32\""));
    const std::optional<DType> dtype = dtype_from_datatype(dt->get<std::string>());
    if (!dtype) bad(cat(where, ": unknown datatype \"", dt->get<std::string>(), "\""));
    if (*dtype != info.dtype)
      bad(cat(where, ": datatype ", dt->get<std::string>(), ", the model takes ", datatype_of(info.dtype)));
    auto sh = in.find("shape");
    if (sh == in.end()) bad(cat(where, ": \"shape\" is missing"));
    const Shape shape = parse_shape(*sh, where);
    if (info.rank_known) {
      if (shape.size() != info.shape.size())
        bad(cat(where, ": shape ", shape_to_string(shape), ", the model takes ", info.shape_string()));
      for (size_t d = 0; d < shape.size(); ++d)
        if (info.shape[d] >= 0 && info.shape[d] != shape[d])
          bad(cat(where, ": shape ", shape_to_string(shape), ", the model takes ", info.shape_string()));
    }
    // The tensor is allocated only once the data for it is known to be there: the declared
    // shape alone never sizes an allocation (a 200-byte request declaring 2^40 elements)
    const int64_t elements = shape_size(shape);
    // binary extension: parameters.binary_data_size bytes of the binary part, in input order
    std::optional<size_t> binary_size;
    if (auto params = in.find("parameters"); params != in.end()) {
      if (!params->is_object()) bad(cat(where, ": \"parameters\" must be an object"));
      if (auto b = params->find("binary_data_size"); b != params->end()) {
        if (!b->is_number_unsigned()) bad(cat(where, ": binary_data_size must be a non-negative integer"));
        binary_size = b->get<uint64_t>();
      }
    }
    if (binary_size) {
      if (!header_length) bad(cat(where, ": binary_data_size without an Inference-Header-Content-Length header"));
      if (in.contains("data")) bad(cat(where, ": both \"data\" and binary_data_size"));
      if (*binary_size > body.size() - binary_at)
        bad(cat(where, ": binary_data_size ", *binary_size, " bytes, but only ", body.size() - binary_at,
                " bytes of binary data are left (truncated body?)"));
      const long double need = static_cast<long double>(elements) * (*dtype == DType::string ? 4 : dtype_size(*dtype));
      if (*dtype == DType::string ? static_cast<long double>(*binary_size) < need : static_cast<long double>(*binary_size) != need)
        bad(cat(where, ": binary_data_size is ", *binary_size, " bytes, the shape ", shape_to_string(shape), " and datatype ",
                dt->get<std::string>(), " need ", *dtype == DType::string ? "at least " : "",
                static_cast<uint64_t>(need)));
      Tensor t(*dtype, shape);
      fill_binary(t, body.data() + binary_at, *binary_size, where);
      binary_at += *binary_size;
      by_port[port] = std::move(t);
    } else {
      auto data = in.find("data");
      if (data == in.end()) bad(cat(where, ": \"data\" is missing (or give parameters.binary_data_size)"));
      std::vector<const json*> flat;
      flatten(*data, flat, where);
      if (static_cast<int64_t>(flat.size()) != elements)
        bad(cat(where, ": ", flat.size(), " values for shape ", shape_to_string(shape), " (", elements, " elements)"));
      Tensor t(*dtype, shape);
      for (size_t i = 0; i < flat.size(); ++i) store(*flat[i], t, i, where);
      by_port[port] = std::move(t);
    }
  }
  if (binary_at != body.size())
    bad(cat(body.size() - binary_at, " bytes of binary data follow the inputs that no input claims"));
  for (size_t p = 0; p < ports.size(); ++p) {
    if (!by_port[p]) bad(cat("input '", ports[p].name, "' is missing"));
    r.inputs.push_back({ports[p].name, std::move(*by_port[p])});
  }

  if (auto outs = j.find("outputs"); outs != j.end()) {
    if (!outs->is_array()) bad("\"outputs\" must be an array");
    std::set<std::string> seen;
    for (size_t k = 0; k < outs->size(); ++k) {
      const json& o = (*outs)[k];
      const std::string where = cat("outputs[", k, "]");
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) bad(cat(where, ": needs a \"name\" string"));
      const std::string n = o["name"].get<std::string>();
      bool known = false;
      for (const auto& p : outputs) known = known || p.name == n;
      if (!known) bad(cat("output '", n, "': the model has no such output"));
      if (!seen.insert(n).second) bad(cat("output '", n, "' is requested twice"));
      r.outputs.push_back({n, param_bool(o, "binary_data", cat("output '", n, "'"))});
    }
  }
  return r;
}

InferResponseData encode_infer_response(const std::string& model, const InferRequestData& request,
                                        const std::vector<std::pair<std::string, Tensor>>& outputs) {
  json j;
  j["model_name"] = model;
  j["model_version"] = "1";
  if (!request.id.empty()) j["id"] = request.id;
  j["outputs"] = json::array();
  std::string binary;
  auto emit = [&](const std::string& name, const Tensor& t, bool as_binary) {
    json o;
    o["name"] = name;
    o["datatype"] = datatype_of(t.dtype());
    o["shape"] = t.shape();
    if (o["datatype"].get<std::string>().empty())
      throw Error(cat("output '", name, "' has type ", dtype_name(t.dtype()), ", which the protocol cannot send"));
    if (as_binary) {
      const size_t before = binary.size();
      if (t.dtype() == DType::string) {
        for (int64_t i = 0; i < t.size(); ++i) {
          const std::string& s = t.data<std::string>()[i];
          const uint32_t len = static_cast<uint32_t>(s.size());
          for (int b = 0; b < 4; ++b) binary += static_cast<char>((len >> (8 * b)) & 0xff);
          binary += s;
        }
      } else {
        binary.append(static_cast<const char*>(t.raw()), t.byte_size());
      }
      o["parameters"]["binary_data_size"] = binary.size() - before;
    } else {
      json data = json::array();
      const int64_t n = t.size();
      const char* p = static_cast<const char*>(t.raw());
      for (int64_t i = 0; i < n; ++i) {
        const char* e = p + static_cast<size_t>(i) * dtype_size(t.dtype());
        switch (t.dtype()) {
          case DType::boolean: data.push_back(*e != 0); break;
          case DType::string: data.push_back(t.data<std::string>()[i]); break;
          case DType::f32: { float f; std::memcpy(&f, e, 4); data.push_back(f); break; }
          case DType::f64: { double d; std::memcpy(&d, e, 8); data.push_back(d); break; }
          case DType::f16: { float16 h; std::memcpy(&h, e, 2); data.push_back(static_cast<float>(h)); break; }
          case DType::bf16: { bfloat16 b; std::memcpy(&b, e, 2); data.push_back(static_cast<float>(b)); break; }
          case DType::u8: data.push_back(*reinterpret_cast<const uint8_t*>(e)); break;
          case DType::i8: data.push_back(*reinterpret_cast<const int8_t*>(e)); break;
          case DType::u16: { uint16_t v; std::memcpy(&v, e, 2); data.push_back(v); break; }
          case DType::i16: { int16_t v; std::memcpy(&v, e, 2); data.push_back(v); break; }
          case DType::u32: { uint32_t v; std::memcpy(&v, e, 4); data.push_back(v); break; }
          case DType::i32: { int32_t v; std::memcpy(&v, e, 4); data.push_back(v); break; }
          case DType::u64: { uint64_t v; std::memcpy(&v, e, 8); data.push_back(v); break; }
          case DType::i64: { int64_t v; std::memcpy(&v, e, 8); data.push_back(v); break; }
          default: break;
        }
      }
      o["data"] = std::move(data);
    }
    j["outputs"].push_back(std::move(o));
  };
  if (request.outputs.empty()) {
    for (const auto& [name, t] : outputs) emit(name, t, request.binary_output);
  } else {
    for (const RequestedOutput& want : request.outputs)
      for (const auto& [name, t] : outputs)
        if (name == want.name) emit(name, t, want.binary || request.binary_output);
  }
  InferResponseData r;
  // NaN / inf have no JSON spelling: dump writes them as null (clients see a missing value)
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty() || (request.binary_output && !outputs.empty())) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kiln::serve
