// kiln command line: run / benchmark / info / inspect / zoo.
#include <kiln/error.hpp>

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

constexpr const char* kVersion = "0.1.0";
constexpr const char* kPropertyHelp =
    "Compile property KEY=VALUE (repeatable; new or old key names, e.g. num_streams=2, CPU_BIND_THREAD=NO, "
    "performance_mode=THROUGHPUT; see docs/settings.md)";

bool is_subcommand(const std::string& s) {
  return s == "run" || s == "benchmark" || s == "info" || s == "inspect" || s == "zoo" || s == "serve" || s == "quantize";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::cli;
  std::vector<std::string> args(argv, argv + argc);
  if (args.empty()) args.push_back("kiln");
  if (args.size() == 2 && args[1] == "help") args[1] = "--help";
  // `kiln MODEL.onnx [...]` means `kiln run MODEL.onnx [...] --random-inputs`.
  if (args.size() >= 2 && !args[1].empty() && args[1][0] != '-' && !is_subcommand(args[1])) {
    args.insert(args.begin() + 1, "run");
    args.push_back("--random-inputs");
  }
  // `kiln benchmark` also takes benchmark_app-style single-dash options (-niter, -time, -pc,
  // -nstreams, ...; CLI11 wants --niter, --time, ...).
  if (args.size() >= 2 && args[1] == "benchmark") {
    for (size_t i = 2; i < args.size(); ++i) {
      if (args[i] == "--") break;
      for (const char* name : {"-niter", "-time", "-pc", "-pcsort", "-hint", "-nstreams", "-nthreads", "-nireq", "-api",
                               "-exec_graph_path", "-report_type", "-report_folder", "-pin", "-infer_precision",
                               "-data_shape", "-shape", "-json_stats", "-cache_dir"})
        if (args[i] == name || args[i].rfind(std::string(name) + "=", 0) == 0) args[i].insert(0, "-");
    }
  }

  CLI::App app{"kiln: a CPU inference engine for ONNX models", "kiln"};
  app.set_version_flag("--version", std::string("kiln ") + kVersion);
  app.footer("Run `kiln MODEL.onnx` to run a model on random inputs.\n"
             "Exit codes: 0 success, 1 error (bad model, bad input file, unsupported op), 2 bad usage.");

  RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run", "Run a model and summarize (optionally save) its outputs");
  run_cmd->add_option("model", run.model, "ONNX model file")->required();
  run_cmd->add_option("-i,--input", run.inputs,
                      "Input tensor NAME=FILE (.npy or ONNX TensorProto .pb); a single-input model also takes FILE")
      ->allow_extra_args(false);
  run_cmd->add_option("-o,--output-dir", run.output_dir, "Write each output as DIR/<name>.npy");
  run_cmd->add_flag("-r,--random-inputs", run.random_inputs, "Generate random data for inputs not given");
  run_cmd->add_option("--shape", run.shapes,
                      "Shape of a random input, NAME=[1,128]; or the value of a symbolic dim, SYMBOL=4 "
                      "(unset dynamic dims default to 1)")
      ->allow_extra_args(false);
  run_cmd->add_option("--seed", run.seed, "Random seed for --random-inputs (default 0)");
  run_cmd->add_option("-n,--iterations", run.iterations, "Run inference N times and report the timing")
      ->check(CLI::Range(1, 1000000000));
  run_cmd->add_option("-t,--threads", run.threads, "Inference threads (compile property inference_num_threads)")
      ->check(CLI::Range(1, 4096));
  run_cmd->add_option("--disable-pass", run.disabled_passes,
                      "Do not run this optimizer pass (repeatable; all-fusions for all of them)")
      ->allow_extra_args(false);
  run_cmd->add_option("-p,--property", run.properties, kPropertyHelp)->allow_extra_args(false);
  run_cmd->add_flag("--compare-precision", run.compare_precision,
                    "Run the model again in f32 on the same inputs and report, per output, how far the "
                    "precision it ran in (bf16 by default on CPUs with native bf16) moved it");

  BenchmarkOptions bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "benchmark", "Time a model: compile time, first inference, latency median/min/p90/max/mean, "
                   "throughput, peak memory");
  bench_cmd->add_option("model", bench.model, "ONNX model file (or -m FILE)");
  bench_cmd->add_option("-m,--model", bench.model_flag, "ONNX model file, as benchmark_app's -m");
  bench_cmd->add_option("-d,--device", bench.device, "Device, as benchmark_app's -d: CPU (kiln's only one)");
  bench_cmd->add_option("-i,--input", bench.inputs,
                        "Input tensor NAME=FILE (.npy or .pb); inputs not given get random data; NAME=DIR cycles "
                        "through the directory's .npy / .pb files, one inference each in turn (reported as first-seen "
                        "and repeated, as -data_shape)")
      ->allow_extra_args(false);
  bench_cmd->add_option("--shape", bench.shapes,
                        "Shape of a random input, NAME=[1,3,224,224]; or a symbolic dim's value, SYMBOL=4; or as "
                        "benchmark_app's -shape: x[1,3,224,224], a[1,8],b[1,8], [1,3,224,224] for a model's one input")
      ->allow_extra_args(false);
  bench_cmd->add_option("--seed", bench.seed, "Random seed for random inputs (default 0)");
  bench_cmd->add_option("--threads", bench.threads,
                        "Inference threads (compile property inference_num_threads; also -nthreads)")
      ->check(CLI::Range(1, 4096));
  auto* niter_opt = bench_cmd->add_option("-n,--niter,--iterations", bench.iterations,
                                          "Timed iterations (also -niter N; default 20)")
                        ->check(CLI::Range(1, 1000000000));
  auto* time_opt = bench_cmd->add_option("-t,--time", bench.seconds,
                                         "Run timed iterations until SECONDS have passed, at least one "
                                         "(as benchmark_app's -t; also -time S)")
                       ->check(CLI::Range(1e-6, 1e9));
  niter_opt->excludes(time_opt);
  bench_cmd->add_option("--warmup", bench.warmup, "Untimed runs after the first inference (default 2)")
      ->check(CLI::Range(0, 1000000000));
  bench_cmd->add_option("--json", bench.json_path, "Also write the figures as JSON to FILE");
  bench_cmd->add_flag("--json_stats", bench.json_stats,
                      "Write the figures as JSON to benchmark_report.json in -report_folder (also -json_stats)");
  bench_cmd->add_option("--cache_dir", bench.cache_dir,
                        "Model cache folder (property cache_dir): the compiled model is read from it when it holds "
                        "this model for these settings, else written there (also -cache_dir)");
  bench_cmd->add_option("--disable-pass", bench.disabled_passes,
                        "Do not run this optimizer pass (repeatable; all-fusions for all of them)")
      ->allow_extra_args(false);
  bench_cmd->add_flag("--pc", bench.perf_counts,
                      "Performance counters: per-node times averaged over the timed iterations (also -pc)");
  bench_cmd->add_option("--report_type", bench.report_type,
                        "CSV reports like benchmark_app's: no_counters (statistics), average_counters (+ per-node "
                        "counters averaged), detailed_counters (+ per request) (also -report_type)")
      ->check(CLI::IsMember({"no_counters", "average_counters", "detailed_counters"}));
  bench_cmd->add_option("--report_folder", bench.report_folder, "Folder for the -report_type CSV files (default .)");
  bench_cmd->add_option("--trace", bench.trace_path,
                        "Write a Chrome-trace / Perfetto timeline (JSON) of every node of every timed request");
  bench_cmd->add_option("--exec_graph_path", bench.exec_graph_path,
                        "Write the runtime graph (as kiln inspect --exec-graph) to FILE (also -exec_graph_path)");
  bench_cmd->add_option("--pcsort", bench.pc_sort,
                        "Order of the -pc table: sort (by time, with totals per node type), no_sort (execution "
                        "order), simple_sort (by time, executed nodes only) (also -pcsort; implies -pc)")
      ->check(CLI::IsMember({"sort", "no_sort", "simple_sort"}));
  bench_cmd->add_option("--data_shape", bench.data_shape,
                        "Cycle through input shapes, one inference each in turn: x[1,3,48,96][1,3,48,120] or "
                        "ids[1,8][1,12],mask[1,8][1,12]; reports first-seen and repeated shapes' latency and the "
                        "plan cache (also -data_shape; sync only, no warmup)");
  bench_cmd->add_option("-p,--property", bench.properties, kPropertyHelp)->allow_extra_args(false);
  bench_cmd->add_option("--hint", bench.hint,
                        "Performance hint (property performance_mode): latency (one stream per NUMA node), "
                        "throughput (streams chosen for FPS; implies -api async), none (also -hint)")
      ->check(CLI::IsMember({"latency", "throughput", "none"}, CLI::ignore_case));
  bench_cmd->add_option("--nstreams", bench.nstreams,
                        "Streams (property num_streams): a number, AUTO or NUMA; implies -api async (also -nstreams)");
  bench_cmd->add_option("--nthreads", bench.nthreads, "Inference threads of all streams together, like -t (also -nthreads)")
      ->check(CLI::Range(1, 4096));
  bench_cmd->add_option("--nireq", bench.nireq,
                        "Infer requests kept in flight in async mode (default: the model's "
                        "optimal_number_of_infer_requests, one per stream) (also -nireq)")
      ->check(CLI::Range(1, 1024));
  bench_cmd->add_option("--api", bench.api,
                        "sync: one request, inference after inference (latency); async: -nireq requests in flight "
                        "(throughput, FPS). Default async with -hint throughput, -nstreams or -nireq > 1 (also -api)")
      ->check(CLI::IsMember({"sync", "async"}));
  bench_cmd->add_option("--pin", bench.pin, "Pin stream threads (property enable_cpu_pinning): YES, NO, NUMA (also -pin)");
  bench_cmd->add_option("--infer_precision", bench.infer_precision,
                        "Inference precision (property inference_precision): f32, bf16 (also -infer_precision)");

  InfoOptions info;
  CLI::App* info_cmd = app.add_subcommand("info", "Describe a model: inputs, outputs, opsets, ops, parameters");
  info_cmd->add_option("model", info.model, "ONNX model file (not needed with --ops)");
  info_cmd->add_flag("-g,--graph", info.graph, "Also print the graph, one line per node");
  info_cmd->add_flag("--ops", info.ops,
                     "List every operator kiln implements with its versions, and the ONNX operators it refuses");

  InspectOptions insp;
  CLI::App* insp_cmd = app.add_subcommand(
      "inspect", "Show the runtime graph kiln makes of a model: node types, primitives, fusions, layouts");
  insp_cmd->add_option("model", insp.model, "ONNX model file")->required();
  insp_cmd->add_option("--shape", insp.shapes, "Input shape NAME=[1,3,224,224], or a symbolic dim SYMBOL=4")
      ->allow_extra_args(false);
  insp_cmd->add_option("--exec-graph", insp.exec_graph_path, "Write the runtime graph as JSON to FILE");
  insp_cmd->add_flag("--explain-fusions", insp.explain_fusions,
                     "Print every fusion applied, and for every one that did not apply the first failed condition");
  insp_cmd->add_option("--dot", insp.dot_path, "Write the original and the optimised graph as Graphviz source");
  insp_cmd->add_option("--svg", insp.svg_path, "Draw the original and the optimised graph as SVG (needs Graphviz)");
  insp_cmd->add_option("--disable-pass", insp.disabled_passes,
                       "Do not run this optimizer pass (repeatable; all-fusions for all of them)")
      ->allow_extra_args(false);
  insp_cmd->add_option("-p,--property", insp.properties, kPropertyHelp)->allow_extra_args(false);

  ServeOptions serve;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve", "Serve a model repository over the KServe v2 REST protocol (docs/serving.md)");
  serve_cmd->add_option("--model-repository", serve.repository, "Folder of models: DIR/<name>/model.onnx (+ config.json)")
      ->required();
  serve_cmd->add_option("--host", serve.host, "Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  serve_cmd->add_option("--http-port", serve.http_port, "HTTP port (default 8000; 0: any free port, printed)")
      ->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--max-request-bytes", serve.max_request_bytes,
                        "Largest request body accepted (default 64 MiB); larger ones get 413")
      ->check(CLI::Range(size_t(1024), size_t(1) << 40));
  serve_cmd->add_option("--http-threads", serve.http_threads,
                        "Threads answering HTTP requests (default: twice the models' streams, at least 8)")
      ->check(CLI::Range(1, 4096));
  serve_cmd->add_option("-p,--property", serve.properties,
                        "Compile property KEY=VALUE for every model (default performance_mode=THROUGHPUT; a "
                        "model's config.json overrides)")
      ->allow_extra_args(false);
  serve_cmd->add_flag("-q,--quiet", serve.quiet, "No per-request log lines on stderr");

  ZooOptions zoo;
  CLI::App* zoo_cmd = app.add_subcommand("zoo", "Write a built-in model with fixed random weights (--list shows them)");
  zoo_cmd->add_option("name", zoo.name, "Model name: resnet18, mlp, bert_tiny");
  zoo_cmd->add_option("-o,--output", zoo.output, "Output .onnx file");
  zoo_cmd->add_option("--seed", zoo.seed, "Weight seed (default 0)");
  zoo_cmd->add_flag("-l,--list", zoo.list, "List the available models");

  QuantizeCmdOptions quant;
  CLI::App* quant_cmd = app.add_subcommand(
      "quantize",
      "Quantize a model to int8 (static QDQ calibrated on samples, or --dynamic) and report the accuracy cost");
  quant_cmd->add_option("model", quant.model, "Float ONNX model")->required();
  quant_cmd->add_option("-o,--output", quant.output, "Quantized ONNX model to write")->required();
  quant_cmd->add_flag("--dynamic", quant.dynamic,
                      "Dynamic quantization: int8 weights, uint8 activations quantized per inference "
                      "(DynamicQuantizeLinear + MatMulInteger / ConvInteger, as ONNX Runtime's quantize_dynamic)");
  quant_cmd->add_option("--method", quant.method,
                        "Static calibration: minmax (default), percentile, entropy (KL divergence, as TensorRT)");
  quant_cmd->add_option("--percentile", quant.percentile, "Share of magnitudes the percentile method keeps (default 99.999)");
  quant_cmd->add_flag("--per-channel", quant.per_channel, "One weight scale per output channel / column");
  quant_cmd->add_flag("--reduce-range", quant.reduce_range,
                      "7-bit weights ([-64, 64], as ONNX Runtime's reduce_range): on CPUs without VNNI (AVX2) "
                      "kiln's int8 convolutions then multiply u8 x s8 on vpmaddubsw, exactly");
  quant_cmd->add_option("--activation-type", quant.activation_type,
                        "Static: the activations' 8-bit type, uint8 (default) or int8");
  quant_cmd->add_flag("--symmetric-activations", quant.symmetric_activations,
                      "Static: activation ranges symmetric about 0 (zero point 0 for int8, 128 for uint8)");
  quant_cmd->add_option("--exclude", quant.exclude, "Node names to keep in float");
  quant_cmd->add_option("--op-types", quant.op_types,
                        "Op types to quantize (default: static Conv MatMul Gemm Add Concat MaxPool; --dynamic MatMul Conv)");
  quant_cmd->add_option("--calibration", quant.calibration,
                        "Samples: DIR/<input>/*.npy or DIR/<input>.npy. Static: calibration and report (required); "
                        "--dynamic: the report (default: one random sample)");
  quant_cmd->add_option("--seed", quant.seed, "Seed of the random sample (default 0)");
  quant_cmd->add_flag("--no-report", quant.no_report, "Write the model without running the accuracy report");

  if (args.size() == 1) {
    std::cout << app.help();
    return 0;
  }

  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  try {
    // a bad KILN_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA is reported before anything runs
    if (!zoo_cmd->parsed()) kiln::Core().get_property("kiln_cpu_isa");
    if (run_cmd->parsed()) return cmd_run(run);
    if (bench_cmd->parsed() && bench.model.empty() && bench.model_flag.empty()) {
      std::cerr << "kiln benchmark: no model given: kiln benchmark MODEL.onnx (or -m MODEL.onnx)\n"
                << bench_cmd->help();
      return 2;  // bad usage, like any required argument missing
    }
    if (bench_cmd->parsed()) return cmd_benchmark(bench);
    if (info_cmd->parsed()) return cmd_info(info);
    if (insp_cmd->parsed()) return cmd_inspect(insp);
    if (serve_cmd->parsed()) return cmd_serve(serve, kVersion);
    if (zoo_cmd->parsed()) return cmd_zoo(zoo);
    if (quant_cmd->parsed()) return cmd_quantize(quant);
    std::cerr << app.help();
    return 2;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "kiln: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: internal error: " << e.what() << "\n";
    return 1;
  }
}
