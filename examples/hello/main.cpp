// Runs an ONNX model once on inputs of zeros (dynamic dims set to 1) and prints each output's
// shape and sum: the smallest program on kiln's public API.
#include <kiln/core.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hello MODEL.onnx\n");
    return 2;
  }
  try {
    kiln::Core core;
    auto model = core.read_model(argv[1]);
    kiln::CompiledModel compiled = core.compile_model(model, {{"inference_precision", "f32"}});
    kiln::InferRequest request = compiled.create_infer_request();
    for (size_t i = 0; i < compiled.inputs().size(); ++i) {
      const kiln::PortInfo& port = compiled.inputs()[i];
      kiln::Shape shape;
      for (int64_t d : port.shape) shape.push_back(d < 0 ? 1 : d);
      request.set_input_tensor(i, kiln::Tensor(port.dtype, shape));  // zeros of the input's type
    }
    request.infer();
    for (size_t i = 0; i < compiled.outputs().size(); ++i) {
      const kiln::Tensor out = request.get_output_tensor(i);
      double sum = 0;
      for (double v : out.to_f64()) sum += v;
      std::printf("%s %s sum=%.6f\n", compiled.outputs()[i].name.c_str(), kiln::shape_to_string(out.shape()).c_str(), sum);
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
  return 0;
}
