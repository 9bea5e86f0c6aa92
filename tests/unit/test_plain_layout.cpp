// is_plain_layout reads a oneDNN descriptor's fields: it must say "plain" exactly where the
// descriptor equals the plain row-major one (what it compared with before), for the layouts the
// CPU nodes set on their outputs: plain, channels-last, blocked, padded, with an offset, with
// another data type, and strides that differ only at dims of size 1.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/dnnl_util.hpp"
#include "cpu/node.hpp"

namespace kiln::test::test_plain_layout {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool equals_plain(const memory::desc& d, const Shape& s, DType t) {
  const std::optional<memory::desc> p = cpu::plain_desc(s, t);
  return p && *p == d;
}

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

TEST(PlainLayout, AgreesWithTheComparisonWithAPlainDescriptor) {
  const std::vector<Shape> shapes = {{7}, {3, 5}, {1, 16, 1, 1}, {2, 16, 9, 7}, {1, 3, 1, 5}, {2, 32, 4, 4, 3}, {1, 1}};
  int plain = 0, other = 0;
  for (const Shape& s : shapes) {
    const memory::dims d = dims_of(s);
    std::vector<memory::desc> descs;
    for (memory::data_type dt : {memory::data_type::f32, memory::data_type::bf16, memory::data_type::s8})
      descs.push_back(*cpu::plain_desc(s, dt == memory::data_type::f32 ? DType::f32 : dt == memory::data_type::bf16 ? DType::bf16 : DType::i8));
    if (s.size() == 4) {
      descs.emplace_back(d, memory::data_type::f32, tag::acdb);     // channels last
      descs.emplace_back(d, memory::data_type::f32, tag::aBcd16b);  // blocked: channels padded to 16
      descs.emplace_back(d, memory::data_type::f32, tag::aBcd8b);
      descs.emplace_back(d, memory::data_type::f32, tag::abcd);
      descs.push_back(descs.back().submemory_desc(d, memory::dims(4, 0)));  // the same, as a view
    }
    if (s.size() == 5) descs.emplace_back(d, memory::data_type::f32, tag::acdeb);
    if (s.size() == 2) {
      descs.emplace_back(d, memory::data_type::f32, tag::ba);  // transposed
      memory::dims bigger = d;
      bigger[0] += 2;
      const memory::desc parent(bigger, memory::data_type::f32, tag::ab);
      descs.push_back(parent.submemory_desc(d, {1, 0}));  // rows 1.. of a larger tensor: an offset
      descs.push_back(parent.submemory_desc(d, {0, 0}));  // its first rows: the row stride is the larger's
    }
    // dense row-major strides except at dims of size 1, which no address uses
    memory::dims strides(s.size());
    memory::dim st = 1;
    for (size_t i = s.size(); i-- > 0;) {
      strides[i] = s[i] == 1 ? 12345 : st;
      st *= s[i];
    }
    descs.emplace_back(d, memory::data_type::f32, strides);
    for (const memory::desc& md : descs) {
      for (DType t : {DType::f32, DType::bf16}) {
        const bool expected = equals_plain(md, s, t);
        EXPECT_EQ(cpu::is_plain_layout(md, s, t), expected) << shape_to_string(s) << " " << dtype_name(t);
        (expected ? plain : other) += 1;
      }
      Shape wrong = s;  // another shape: never plain for it
      wrong.back() += 1;
      EXPECT_FALSE(cpu::is_plain_layout(md, wrong, DType::f32)) << shape_to_string(s);
    }
  }
  EXPECT_GT(plain, 10);  // both answers were exercised
  EXPECT_GT(other, 10);
}

TEST(PlainLayout, AnEmptyTensorAndAScalar) {
  const Shape empty = {2, 0, 3};
  EXPECT_TRUE(cpu::is_plain_layout(*cpu::plain_desc(empty, DType::f32), empty, DType::f32));
  const memory::desc transposed({2, 0, 3}, memory::data_type::f32, tag::acb);
  EXPECT_EQ(cpu::is_plain_layout(transposed, empty, DType::f32), equals_plain(transposed, empty, DType::f32));
  // a rank-0 tensor has no oneDNN descriptor of its own: never "plain" by one
  EXPECT_FALSE(cpu::is_plain_layout(memory::desc({1}, memory::data_type::f32, tag::a), Shape{}, DType::f32));
}

}  // namespace
}  // namespace kiln::test::test_plain_layout
