#pragma once
// The KServe v2 inference protocol's tensors (https://kserve.github.io/website/, "Open Inference
// Protocol"): an inference request's JSON (inputs with name, shape, datatype and data, in
// row-major order, flat or nested), the binary tensor extension (tensors appended to the body
// after a JSON header of Inference-Header-Content-Length bytes, each input's size in its
// parameters.binary_data_size), and the response, JSON or binary.
//
// Nothing in a request is trusted: every field is checked against the model's inputs before
// any tensor is made, sizes against the bytes present, numbers against their datatype's range.
// A bad request throws RequestError (HTTP 400) naming the field and what was expected.
#include <kiln/core.hpp>
#include <kiln/error.hpp>
#include <kiln/tensor.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::serve {

class RequestError : public Error {
 public:
  explicit RequestError(const std::string& what, int status = 400) : Error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// "FP32" <-> DType::f32, ...; BYTES is DType::string. nullopt / "" for types the protocol lacks.
std::optional<DType> dtype_from_datatype(const std::string& datatype);
std::string datatype_of(DType t);

struct InferInput {
  std::string name;
  Tensor tensor;
};

struct RequestedOutput {
  std::string name;
  bool binary = false;  // parameters.binary_data
};

struct InferRequestData {
  std::string id;                       // echoed in the response
  std::vector<InferInput> inputs;       // every model input, in the model's order
  std::vector<RequestedOutput> outputs;  // empty: every output, as JSON unless binary_output
  bool binary_output = false;           // request parameters.binary_data_output
};

// `body`: the HTTP body; `header_length`: Inference-Header-Content-Length when given (the JSON
// is then body[0, header_length) and the binary tensors follow). `ports`: the model's inputs;
// `outputs`: its outputs (for checking requested names).
InferRequestData decode_infer_request(const std::string& body, std::optional<size_t> header_length,
                                      const std::vector<PortInfo>& ports, const std::vector<PortInfo>& outputs);

struct InferResponseData {
  std::string body;
  std::optional<size_t> header_length;  // set when binary tensors follow the JSON
};

// The response to `request` of model `model` (version "1"): `outputs` are the model's outputs
// in order, with their names.
InferResponseData encode_infer_response(const std::string& model, const InferRequestData& request,
                                        const std::vector<std::pair<std::string, Tensor>>& outputs);

// {"error": message}: the body of every failed request.
std::string error_body(const std::string& message);

}  // namespace kiln::serve
