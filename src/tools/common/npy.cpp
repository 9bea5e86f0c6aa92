#include "tools/common/npy.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/strings.hpp"

namespace kiln::tools {

static_assert(std::endian::native == std::endian::little, "kiln's .npy code assumes a little-endian host");

namespace {

const char kMagic[] = "\x93NUMPY";  // 6 bytes

struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// A tiny parser for the Python dict literal in a .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const std::string& what) : s_(s), what_(what) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        KILN_CHECK(peek() == '\'' || peek() == '"',
                   cat(what_, ": unsupported .npy dtype descriptor (structured dtypes are not supported)"));
        h.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        have_shape = true;
      } else {
        fail(cat("unexpected key '", key, "' in the header"));
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      expect('}');
      break;
    }
    skip_ws();
    KILN_CHECK(pos_ == s_.size(), cat(what_, ": malformed .npy header (trailing characters after the dict)"));
    if (!have_descr || !have_fortran || !have_shape)
      fail("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(cat(what_, ": malformed .npy header: ", msg, " (header: ", s_.substr(0, 200), ")"));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(cat("expected '", c, "' at offset ", pos_));
    ++pos_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"') fail(cat("expected a quoted string at offset ", pos_));
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string r = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return r;
  }
  bool parse_bool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  Shape parse_shape() {
    Shape shape;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++pos_;
        break;
      }
      if (peek() < '0' || peek() > '9') fail(cat("expected a dimension at offset ", pos_));
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("dimension too large");
        v = v * 10 + (peek() - '0');
        ++pos_;
      }
      // Python 2 era files may write long ints as "3L".
      if (peek() == 'L') ++pos_;
      shape.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      expect(')');
      break;
    }
    return shape;
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

// descr -> (dtype, big_endian)
DType dtype_from_descr(const std::string& descr, bool& big_endian, const std::string& what) {
  KILN_CHECK(descr.size() >= 2, cat(what, ": unsupported .npy dtype '", descr, "'"));
  char order = descr[0];
  std::string code = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '=';
    code = descr;
  }
  big_endian = order == '>';
  static const std::pair<const char*, DType> table[] = {
      {"f4", DType::f32}, {"f2", DType::f16}, {"f8", DType::f64}, {"i1", DType::i8},  {"u1", DType::u8},
      {"i2", DType::i16}, {"u2", DType::u16}, {"i4", DType::i32}, {"u4", DType::u32}, {"i8", DType::i64},
      {"u8", DType::u64}, {"b1", DType::boolean}, {"?", DType::boolean}, {"V2", DType::bf16},
  };
  for (auto& [c, t] : table)
    if (code == c) return t;
  throw Error(cat(what, ": unsupported .npy dtype '", descr,
                  "' (kiln reads f2/f4/f8, i1..i8, u1..u8, b1 and V2 as bfloat16)"));
}

uint32_t read_le(const std::string& b, size_t off, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[off + i])) << (8 * i);
  return v;
}

// UTF-8 <-> UTF-32 (numpy's unicode arrays hold UTF-32 code points). Invalid UTF-8 bytes
// become U+FFFD.
std::u32string utf8_to_utf32(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + static_cast<size_t>(n) > s.size()) {
      out += U'\xFFFD';
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3f);
    out += cp;
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string utf32_to_utf8(char32_t cp) {
  std::string o;
  if (cp < 0x80) {
    o += static_cast<char>(cp);
  } else if (cp < 0x800) {
    o += static_cast<char>(0xc0 | (cp >> 6));
    o += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    o += static_cast<char>(0xe0 | (cp >> 12));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    o += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x110000) {
    o += static_cast<char>(0xf0 | (cp >> 18));
    o += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    o += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    o += "\xEF\xBF\xBD";
  }
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("cannot open '", path, "'"));
  std::ostringstream ss;
  ss << f.rdbuf();
  KILN_CHECK(!f.bad(), cat("error reading '", path, "'"));
  return ss.str();
}

}  // namespace

std::string npy_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<V2";
    case DType::f64: return "<f8";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::i16: return "<i2";
    case DType::u16: return "<u2";
    case DType::i32: return "<i4";
    case DType::u32: return "<u4";
    case DType::i64: return "<i8";
    case DType::u64: return "<u8";
    case DType::boolean: return "|b1";
    default: break;
  }
  throw Error(cat("cannot write a tensor of element type ", dtype_name(t), " as .npy"));
}

Tensor npy_from_bytes(const std::string& b, const std::string& what) {
  KILN_CHECK(b.size() >= 6 && std::memcmp(b.data(), kMagic, 6) == 0,
             cat(what, ": not a .npy file (missing the \\x93NUMPY magic)"));
  KILN_CHECK(b.size() >= 10, cat(what, ": truncated .npy file (", b.size(), " bytes)"));
  int major = static_cast<unsigned char>(b[6]);
  size_t len_bytes = 0;
  if (major == 1) len_bytes = 2;
  else if (major == 2 || major == 3) len_bytes = 4;
  else throw Error(cat(what, ": unsupported .npy format version ", major, ".", static_cast<int>(static_cast<unsigned char>(b[7]))));
  KILN_CHECK(b.size() >= 8 + len_bytes, cat(what, ": truncated .npy file (header length)"));
  size_t header_len = read_le(b, 8, len_bytes);
  size_t data_off = 8 + len_bytes + header_len;
  KILN_CHECK(data_off <= b.size(), cat(what, ": truncated .npy file (header is ", header_len, " bytes, file has ",
                                       b.size(), ")"));
  std::string header_text = b.substr(8 + len_bytes, header_len);
  Header h = HeaderParser(header_text, what).parse();
  KILN_CHECK(!h.fortran, cat(what, ": Fortran-order .npy arrays are not supported (save with C order, e.g. "
                                   "np.ascontiguousarray)"));
  bool big = false;
  if (h.descr.size() >= 3 && (h.descr[0] == '<' || h.descr[0] == '>' || h.descr[0] == '=') && h.descr[1] == 'U') {
    // unicode strings: `width` UTF-32 code points per element, padded with zeros
    const std::string w = h.descr.substr(2);
    KILN_CHECK(!w.empty() && w.size() < 9 && std::all_of(w.begin(), w.end(), ::isdigit),
               cat(what, ": unsupported .npy dtype '", h.descr, "'"));
    const uint64_t width = std::stoull(w);
    // numpy never writes U0 (its empty strings are U1); with no bytes per element the data
    // would not bound the element count, and a 200-byte file could ask for billions of strings
    KILN_CHECK(width >= 1, cat(what, ": .npy dtype '", h.descr, "' has no room for a character (numpy writes U1 and wider)"));
    uint64_t count = 1;
    for (int64_t d : h.shape)
      KILN_CHECK(!__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count), cat(what, ": .npy shape too large"));
    uint64_t nbytes = 0;
    KILN_CHECK(!__builtin_mul_overflow(count, width * 4, &nbytes) && nbytes <= (uint64_t(1) << 40),
               cat(what, ": .npy shape too large"));
    KILN_CHECK(b.size() - data_off == nbytes, cat(what, ": a .npy of shape ", shape_to_string(h.shape), " and dtype ",
                                                  h.descr, " needs ", nbytes, " data bytes, the file has ",
                                                  b.size() - data_off));
    Tensor t(DType::string, h.shape);
    std::string* out = t.data<std::string>();
    for (uint64_t i = 0; i < count; ++i) {
      std::string s;
      for (uint64_t k = 0; k < width; ++k) {
        const size_t at = data_off + static_cast<size_t>((i * width + k) * 4);
        char32_t cp = h.descr[0] == '>' ? (static_cast<char32_t>(static_cast<unsigned char>(b[at])) << 24) |
                                              (static_cast<char32_t>(static_cast<unsigned char>(b[at + 1])) << 16) |
                                              (static_cast<char32_t>(static_cast<unsigned char>(b[at + 2])) << 8) |
                                              static_cast<unsigned char>(b[at + 3])
                                        : read_le(b, at, 4);
        if (cp == 0) break;
        s += utf32_to_utf8(cp);
      }
      out[i] = std::move(s);
    }
    return t;
  }
  DType dt = dtype_from_descr(h.descr, big, what);
  size_t esize = dtype_size(dt);
  uint64_t count = 1;
  for (int64_t d : h.shape)
    KILN_CHECK(!__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count), cat(what, ": .npy shape too large"));
  uint64_t nbytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(count, static_cast<uint64_t>(esize), &nbytes) && nbytes <= (uint64_t(1) << 48),
             cat(what, ": .npy shape too large"));
  size_t have = b.size() - data_off;
  KILN_CHECK(have >= nbytes, cat(what, ": truncated .npy file: shape ", shape_to_string(h.shape), " of ",
                                 h.descr, " needs ", nbytes, " data bytes, the file has ", have));
  KILN_CHECK(have == nbytes, cat(what, ": malformed .npy file: ", have - nbytes,
                                 " unexpected bytes after the array data"));
  Tensor t(dt, h.shape);
  if (nbytes == 0) return t;
  unsigned char* dst = static_cast<unsigned char*>(t.raw());
  std::memcpy(dst, b.data() + data_off, nbytes);
  if (big && esize > 1) {
    for (uint64_t i = 0; i < count; ++i) std::reverse(dst + i * esize, dst + (i + 1) * esize);
  }
  if (dt == DType::boolean) {
    for (uint64_t i = 0; i < count; ++i) dst[i] = dst[i] ? 1 : 0;  // any nonzero byte is true
  }
  return t;
}

std::string npy_to_bytes(const Tensor& t) {
  KILN_CHECK(t.defined() && t.is_tensor(), "cannot write an undefined tensor, a sequence or an optional as .npy");
  // strings: numpy unicode, as wide as the longest (in code points)
  std::vector<std::u32string> wide;
  size_t width = 1;
  if (t.dtype() == DType::string) {
    for (int64_t i = 0; i < t.size(); ++i) {
      wide.push_back(utf8_to_utf32(t.data<std::string>()[i]));
      width = std::max(width, wide.back().size());
    }
  }
  const std::string descr = t.dtype() == DType::string ? "<U" + std::to_string(width) : npy_descr(t.dtype());
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.rank(); ++i) dict += std::to_string(t.shape()[i]) + (t.rank() == 1 ? "," : (i + 1 < t.rank() ? ", " : ""));
  dict += "), }";
  // Version 1.0 when the header length fits in 16 bits, else 2.0. Pad with spaces so that
  // the data starts at a multiple of 64 bytes; the header ends with '\n'.
  int major = 1;
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - prefix > 65535) {
    major = 2;
    prefix = 12;
    total = prefix + dict.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  size_t header_len = padded - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xff);
  out += dict;
  if (t.dtype() == DType::string) {
    for (const std::u32string& s : wide)
      for (size_t k = 0; k < width; ++k) {
        const char32_t cp = k < s.size() ? s[k] : 0;
        for (int b = 0; b < 4; ++b) out += static_cast<char>((cp >> (8 * b)) & 0xff);
      }
    return out;
  }
  if (t.byte_size() > 0) out.append(static_cast<const char*>(t.raw()), t.byte_size());
  return out;
}

Tensor read_npy(const std::string& path) { return npy_from_bytes(read_file(path), "'" + path + "'"); }

void write_npy(const std::string& path, const Tensor& t) {
  std::string bytes = npy_to_bytes(t);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(f, cat("cannot write '", path, "'"));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  KILN_CHECK(f, cat("error writing '", path, "'"));
}

}  // namespace kiln::tools
