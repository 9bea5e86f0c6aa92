#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/dispatch.hpp"
#include "frontend/onnx/tensor_proto.hpp"
#include "tools/common/npy.hpp"
#include "tools/common/tensor_file.hpp"
#include "temp_dir.hpp"

namespace test_npy {

using namespace kiln;
using namespace kiln::tools;

namespace {

// A tensor of `dt` with values 0, 1, -2, 3, ... (mod a small range; bool alternates).
Tensor sample(DType dt, const Shape& shape) {
  Tensor t(dt, shape);
  dispatch_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = (i % 3) == 1;
      } else if constexpr (std::is_unsigned_v<T>) {
        p[i] = static_cast<T>(i * 7 % 200);
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>((i % 2 ? -1 : 1) * (i * 5 % 100));
      } else {
        p[i] = T(static_cast<float>(i) * 0.25f - 1.5f);
      }
    }
  });
  return t;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.byte_size(), b.byte_size());
  if (a.byte_size()) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.byte_size()), 0);
  }
}

// Hand-made .npy bytes: header dict (padded), then data.
std::string make_npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  size_t n = h.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}


}  // namespace

TEST(Npy, RoundTripEveryDtype) {
  const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,  DType::u8,  DType::i16,
                       DType::u16, DType::i32, DType::u32,  DType::i64, DType::u64, DType::boolean};
  for (DType dt : all) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{5}, Shape{0, 4}, Shape{2, 1, 3, 2}}) {
      Tensor t = sample(dt, shape);
      std::string bytes = npy_to_bytes(t);
      // Data is 64-byte aligned and the header ends with '\n'.
      size_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
      EXPECT_EQ((10 + hlen) % 64, 0u);
      EXPECT_EQ(bytes[10 + hlen - 1], '\n');
      expect_same(npy_from_bytes(bytes), t);
    }
  }
}

TEST(Npy, HeaderText) {
  std::string b = npy_to_bytes(Tensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_NE(b.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"), std::string::npos);
  b = npy_to_bytes(Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_NE(b.find("'descr': '<i8'"), std::string::npos);
  EXPECT_NE(b.find("'shape': (2, 3)"), std::string::npos);
  b = npy_to_bytes(Tensor::scalar<bool>(true));
  EXPECT_NE(b.find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(b.find("'shape': ()"), std::string::npos);
  EXPECT_EQ(npy_descr(DType::bf16), "<V2");
}

TEST(Npy, ReadsNumpyWrittenVariants) {
  // Version 2.0 header, keys in another order, double quotes, no trailing comma.
  Tensor t = npy_from_bytes(make_npy("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}",
                                     f32_bytes({1.5f, -2.f}), 2));
  ASSERT_EQ(t.dtype(), DType::f32);
  ASSERT_EQ(t.shape(), (Shape{2}));
  EXPECT_FLOAT_EQ(t.data<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(t.data<float>()[1], -2.f);
  // Big-endian int32.
  std::string be = {0, 0, 1, 2, static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xff),
                    static_cast<char>(0xfe)};
  t = npy_from_bytes(make_npy("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be));
  ASSERT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.data<int32_t>()[0], 258);
  EXPECT_EQ(t.data<int32_t>()[1], -2);
  // Bool bytes other than 0/1 read as true.
  t = npy_from_bytes(make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\0\x05\x01", 3)));
  ASSERT_EQ(t.dtype(), DType::boolean);
  EXPECT_FALSE(t.data<bool>()[0]);
  EXPECT_TRUE(t.data<bool>()[1]);
  EXPECT_TRUE(t.data<bool>()[2]);
  // Version 1 with a Fortran-order 1-d array? still Fortran -> rejected below; here a 3-d C array.
  t = npy_from_bytes(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2), }", f32_bytes({3.f, 4.f})));
  EXPECT_EQ(t.shape(), (Shape{1, 1, 2}));
  EXPECT_FLOAT_EQ(t.data<float>()[1], 4.f);
}

TEST(Npy, LargeHeaderUsesVersion2) {
  // A rank-30000 shape of ones needs a header longer than 65535 bytes.
  Shape s(30000, 1);
  Tensor t(DType::u8, s);
  std::string b = npy_to_bytes(t);
  EXPECT_EQ(b[6], 2);
  expect_same(npy_from_bytes(b), t);
}

TEST(Npy, RejectsMalformed) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string data = f32_bytes({1.f, 2.f});
  EXPECT_NO_THROW(npy_from_bytes(make_npy(ok_dict, data)));
  // Not npy at all / empty.
  EXPECT_THROW(npy_from_bytes(""), Error);
  EXPECT_THROW(npy_from_bytes("hello world, not numpy"), Error);
  // Truncated data, truncated header, trailing garbage.
  EXPECT_THROW(npy_from_bytes(make_npy(ok_dict, data.substr(0, 7))), Error);
  EXPECT_THROW(npy_from_bytes(make_npy(ok_dict, data).substr(0, 40)), Error);
  EXPECT_THROW(npy_from_bytes(make_npy(ok_dict, data).substr(0, 9)), Error);
  EXPECT_THROW(npy_from_bytes(make_npy(ok_dict, data + "xx")), Error);
  // Fortran order.
  try {
    npy_from_bytes(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", data));
    FAIL() << "Fortran order accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Fortran"), std::string::npos) << e.what();
  }
  // Unsupported dtypes, structured dtypes, bad versions.
  EXPECT_THROW(npy_from_bytes(make_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", data)), Error);
  EXPECT_THROW(npy_from_bytes(make_npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", data)), Error);
  EXPECT_THROW(npy_from_bytes(make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", data)),
               Error);
  // Unicode of width 0 (found by fuzz_npy): no data bytes bound the element count, so a
  // 200-byte file asked for 316 million strings
  try {
    npy_from_bytes(make_npy("{'descr': '<U0', 'fortran_order': False, 'shape': (21100000, 15), }", ""));
    FAIL() << "U0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'<U0' has no room for a character"), std::string::npos) << e.what();
  }
  std::string v9 = make_npy(ok_dict, data);
  v9[6] = 9;
  EXPECT_THROW(npy_from_bytes(v9), Error);
  // Broken dicts.
  for (const std::string& dict : {
           std::string("{'descr': '<f4', 'fortran_order': False}"),                        // no shape
           std::string("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }"),       // bad bool
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),      // negative dim
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"), // unknown key
           std::string("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }"),        // bad quote
           std::string("['descr', '<f4']"),
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }"),
       }) {
    SCOPED_TRACE(dict);
    EXPECT_THROW(npy_from_bytes(make_npy(dict, data)), Error);
  }
  // Header length pointing past the end of the file.
  std::string big = make_npy(ok_dict, data);
  big[8] = static_cast<char>(0xff);
  big[9] = static_cast<char>(0xff);
  EXPECT_THROW(npy_from_bytes(big), Error);
}

TEST(Npy, Files) {
  const kiln::test::ScopedTempDir dir("npy");
  auto path = (dir / "x.npy").string();
  Tensor t = sample(DType::f32, {3, 4});
  write_npy(path, t);
  expect_same(read_npy(path), t);
  expect_same(load_tensor_file(path), t);
  // Sniffed by magic when the extension is unusual.
  auto other = (dir / "x.bin").string();
  std::filesystem::copy_file(path, other);
  expect_same(load_tensor_file(other), t);
  EXPECT_THROW(read_npy((dir / "missing.npy").string()), Error);
  EXPECT_THROW(load_tensor_file((dir / "missing.npy").string()), Error);
  EXPECT_THROW(load_tensor_file(dir.path().string()), Error);
  EXPECT_THROW(write_npy((dir / "no_such_dir" / "y.npy").string(), t), Error);
  {
    std::ofstream f(dir / "bad.npy", std::ios::binary);
    f << "\x93NUMPY garbage";
  }
  EXPECT_THROW(load_tensor_file((dir / "bad.npy").string()), Error);
}

TEST(Npy, TensorProtoFiles) {
  const kiln::test::ScopedTempDir dir("npy");
  Tensor t = sample(DType::i32, {2, 5});
  onnx::TensorProto proto;
  frontend::tensor_to_proto(t, proto);
  for (const char* name : {"t.pb", "t_no_ext"}) {
    auto path = (dir / name).string();
    {
      std::ofstream f(path, std::ios::binary);
      ASSERT_TRUE(proto.SerializeToOstream(&f));
    }
    expect_same(load_tensor_file(path), t);
  }
  {
    std::ofstream f(dir / "junk.pb", std::ios::binary);
    f << "\xff\xff\xff not a protobuf";
  }
  EXPECT_THROW(load_tensor_file((dir / "junk.pb").string()), Error);
}

}  // namespace test_npy
