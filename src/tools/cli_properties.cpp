// `--property KEY=VALUE` for kiln run / benchmark / inspect.
#include "commands.hpp"
#include "core/strings.hpp"

namespace kiln::cli {

void add_property(AnyMap& properties, const std::string& key, const std::string& value, const std::string& from) {
  auto it = properties.find(key);
  if (it != properties.end() && it->second != value)
    throw Error(cat("property ", key, " is given twice ('", it->second, "' and '", value, "' from ", from, ")"));
  properties[key] = value;
}

AnyMap parse_property_specs(const std::vector<std::string>& specs) {
  AnyMap properties;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    KILN_CHECK(eq != std::string::npos && eq > 0,
               cat("--property '", spec, "': expected KEY=VALUE, e.g. --property num_streams=2"));
    add_property(properties, spec.substr(0, eq), spec.substr(eq + 1), "--property");
  }
  return properties;
}

std::string describe_precision(const std::string& effective, const AnyMap& properties) {
  if (properties.count("inference_precision") || properties.count("ENFORCE_BF16")) return effective;
  if (effective == "f32" && (properties.count("execution_mode") || properties.count("EXECUTION_MODE_HINT")))
    return "f32  (execution_mode=ACCURACY)";
  if (effective == "bf16")
    return "bf16  (default: this CPU runs bf16 natively; --property execution_mode=ACCURACY for f32, "
           "--compare-precision to see the difference)";
  return "f32  (default: this CPU has no native bf16)";
}

bool gives_cache_dir(const AnyMap& properties) {
  for (const char* key : {"cache_dir", "CACHE_DIR"})
    if (auto it = properties.find(key); it != properties.end() && !it->second.empty()) return true;
  return false;
}

}  // namespace kiln::cli
