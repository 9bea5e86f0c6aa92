// WeightsCache's placement of packed weights: `streamed` weights (FullyConnected, recurrent gates)
// past the first 4 MiB of them carved from its own 2 MiB-aligned chunks advised as transparent
// huge pages, the first 4 MiB and `reused` ones on oneDNN's allocation; either way packed once and
// read back as packed.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/weights_cache.hpp"

namespace kiln::test::test_weights_cache {
namespace {

using dnnl::memory;
using Pages = cpu::WeightsCache::Pages;

// The "THPeligible" field of /proc/self/smaps for the mapping that holds `p`: 1 where the kernel
// may back it with huge pages (advised, or THP "always"), 0 where not, -1 when the kernel does
// not say (no such field, or no mapping found).
int thp_eligible(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

// The system's THP mode, the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
// ("always", "madvise", "never"), or "" when the file is not there.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(f, all);
  const size_t a = all.find('['), b = all.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : all.substr(a + 1, b - a - 1);
}

// Packs `floats` floats of value i * 0.5 + seed through the cache.
memory pack(cpu::WeightsCache& cache, const Tensor& source, const std::string& variant, int64_t floats, float seed,
            Pages pages, int* packed_count) {
  const memory::desc target({floats}, memory::data_type::f32, memory::format_tag::a);
  return cache.get(
      source, variant, target,
      [&](memory& dst) {
        ++*packed_count;
        float* d = static_cast<float*>(dst.get_data_handle());
        for (int64_t i = 0; i < floats; ++i) d[i] = static_cast<float>(i) * 0.5f + seed;
      },
      pages);
}

void expect_packed(const memory& m, int64_t floats, float seed) {
  const float* d = static_cast<const float*>(m.get_data_handle());
  for (int64_t i = 0; i < floats; i += 997)
    ASSERT_EQ(d[i], static_cast<float>(i) * 0.5f + seed) << "element " << i;
  EXPECT_EQ(d[floats - 1], static_cast<float>(floats - 1) * 0.5f + seed);
}

TEST(WeightsCache, StreamedWeightsPastTheFirstMegabytesLiveOnHugePageAdvisedChunks) {
  cpu::WeightsCache cache;
  std::vector<Tensor> sources;
  for (int i = 0; i < 5; ++i) sources.emplace_back(DType::f32, Shape{4});
  int packed = 0;
  // 1 MiB (within the first 4 MiB: 4 KiB pages), 5 MiB (past them: a chunk), a small one after it
  // in the same chunk, one larger than a chunk (20 MiB: a chunk of its own), a small one after it
  const int64_t sizes[] = {1 << 18, 5 << 18, 100, 5 << 20, 1000};
  const bool in_chunk[] = {false, true, true, true, true};
  std::vector<memory> got;
  for (int i = 0; i < 5; ++i)
    got.push_back(pack(cache, sources[static_cast<size_t>(i)], "w", sizes[i], static_cast<float>(i), Pages::streamed,
                       &packed));
  EXPECT_EQ(packed, 5);
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    expect_packed(got[static_cast<size_t>(i)], sizes[i], static_cast<float>(i));  // a later one wrote over none
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got[static_cast<size_t>(i)].get_data_handle()) % 64, 0u);
  }
  // asked again: the same memory, not packed again
  EXPECT_EQ(pack(cache, sources[1], "w", sizes[1], 1.0f, Pages::streamed, &packed).get_data_handle(),
            got[1].get_data_handle());
  EXPECT_EQ(packed, 5);
  size_t total = 0;
  for (int64_t s : sizes) total += static_cast<size_t>(s) * sizeof(float);
  EXPECT_EQ(cache.bytes(), total);
  EXPECT_EQ(cache.entries(), 5u);

  // the advice reached the kernel where it takes advice (THP "madvise"; "always" makes every
  // mapping eligible)
  const std::string mode = thp_mode();
  if (thp_eligible(got[1].get_data_handle()) < 0 || (mode != "madvise" && mode != "always"))
    GTEST_SKIP() << "THP mode '" << mode << "'";
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(thp_eligible(got[static_cast<size_t>(i)].get_data_handle()), in_chunk[i] || mode == "always" ? 1 : 0);
  }
}

TEST(WeightsCache, ReusedWeightsStayOnOneDnnsAllocation) {
  cpu::WeightsCache cache;
  Tensor w(DType::f32, Shape{4}), v(DType::f32, Shape{4});
  int packed = 0;
  const memory reused = pack(cache, w, "w", 5 << 18, 2.0f, Pages::reused, &packed);
  const memory streamed = pack(cache, v, "w", 5 << 18, 3.0f, Pages::streamed, &packed);  // 5 MiB: a chunk
  expect_packed(reused, 5 << 18, 2.0f);
  expect_packed(streamed, 5 << 18, 3.0f);
  // one source in both placements is one entry per layout: the placement is not part of the key
  EXPECT_EQ(pack(cache, w, "w", 5 << 18, 2.0f, Pages::streamed, &packed).get_data_handle(), reused.get_data_handle());
  EXPECT_EQ(packed, 2);
  const std::string mode = thp_mode();
  if (mode != "madvise" || thp_eligible(streamed.get_data_handle()) < 0) GTEST_SKIP() << "THP mode '" << mode << "'";
  EXPECT_EQ(thp_eligible(reused.get_data_handle()), 0);  // a malloc'd mapping, not advised
  EXPECT_EQ(thp_eligible(streamed.get_data_handle()), 1);
}

}  // namespace
}  // namespace kiln::test::test_weights_cache
