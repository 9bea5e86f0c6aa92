#include "cpu/model_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <tuple>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/weights_cache.hpp"
#include "ir/serialize.hpp"

namespace kiln::cpu {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'M', 'C', 'F', '\n'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kChunkBytes = uint64_t(8) << 20;  // the data region's hash granularity
constexpr uint64_t kAlign = 64;                      // of each tensor / packed weight
constexpr uint64_t kPage = 4096;                     // of the data region (mapped)

struct Hash128 {
  uint64_t low = 0, high = 0;
  bool operator==(const Hash128& o) const { return low == o.low && high == o.high; }
};
Hash128 hash128(const void* p, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(p, n);
  return {h.low64, h.high64};
}
std::string hex(const Hash128& h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high),
                static_cast<unsigned long long>(h.low));
  return buf;
}

// The fixed-size start of the file.
struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t meta_bytes;   // after the chunk table
  uint64_t data_offset;  // page-aligned
  uint64_t data_bytes;
  uint64_t chunk_bytes;
  uint64_t chunks;       // hashes in the table, one per chunk of the data region
  Hash128 table_hash;
  Hash128 meta_hash;
  Hash128 header_hash;   // of every field above
};
static_assert(sizeof(Header) == 104 && offsetof(Header, header_hash) == 88);

Hash128 header_hash(const Header& h) { return hash128(&h, offsetof(Header, header_hash)); }
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// A read-only-shared, privately writable mapping of a file range; unmapped when the last
// tensor over it goes.
std::shared_ptr<void> map_range(int fd, uint64_t offset, uint64_t bytes, bool populate) {
  if (bytes == 0) return std::make_shared<char>(0);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd,
                   static_cast<off_t>(offset));
  if (p == MAP_FAILED) throw Error(cat("cannot map ", bytes, " bytes: ", std::strerror(errno)));
  return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
}

// Runs f(i) for i in [0, n) on up to `threads` threads.
template <class F>
void parallel_for(size_t n, int threads, F&& f) {
  const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1)));
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
}

int hash_threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)); }

void write_all(int fd, const void* p, size_t n, uint64_t offset, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, c, std::min<size_t>(n, size_t(1) << 30), static_cast<off_t>(offset));
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      throw Error(cat("model cache: cannot write '", path, "': ", std::strerror(errno)));
    }
    c += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

bool read_all(int fd, void* p, size_t n, uint64_t offset) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

void write_log(ir::ByteWriter& w, const transforms::PassLog& log) {
  w.u64(log.entries.size());
  for (const auto& e : log.entries) {
    w.str(e.pass);
    w.str(e.where);
    w.str(e.message);
    w.u8(e.applied ? 1 : 0);
  }
}

transforms::PassLog read_log(ir::ByteReader& r) {
  transforms::PassLog log;
  for (uint64_t i = 0, n = r.count(25); i < n; ++i) {
    transforms::PassLog::Entry e;
    e.pass = r.str();
    e.where = r.str();
    e.message = r.str();
    e.applied = r.u8() != 0;
    log.entries.push_back(std::move(e));
  }
  return log;
}

// The data region being laid out: distinct storage (address and size) -> its place.
struct Blob {
  const void* data;
  uint64_t bytes;
  uint64_t offset;  // in the data region
};

}  // namespace

std::string hash_parts(const std::vector<std::string>& parts) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_128bits_reset(s);
  for (const std::string& p : parts) {
    const uint64_t n = p.size();
    XXH3_128bits_update(s, &n, sizeof n);
    XXH3_128bits_update(s, p.data(), p.size());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(s);
  XXH3_freeState(s);
  return hex({h.low64, h.high64});
}

std::string hash_file(const std::string& path, int threads) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0)
    throw Error(cat("cannot read '", path, "': ", std::strerror(errno)));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const std::shared_ptr<void> map = map_range(f.fd, 0, size, /*populate=*/false);
  const char* p = static_cast<const char*>(map.get());
  // fixed pieces (the hash does not depend on the thread count), hashed in parallel
  constexpr uint64_t kPiece = uint64_t(32) << 20;
  const size_t pieces = static_cast<size_t>((size + kPiece - 1) / kPiece);
  std::vector<Hash128> h(pieces);
  parallel_for(pieces, threads, [&](size_t i) {
    const uint64_t at = i * kPiece;
    h[i] = hash128(p + at, static_cast<size_t>(std::min(kPiece, size - at)));
  });
  std::vector<std::string> parts{std::to_string(size)};
  for (const Hash128& x : h) parts.push_back(hex(x));
  return hash_parts(parts);
}

std::string hash_graph(const ir::Graph& g) {
  std::vector<std::string> parts;
  ir::ByteWriter w;
  std::map<std::pair<const void*, size_t>, uint64_t> ids;  // one hash per distinct storage
  ir::write_graph(g, w, [&](const Tensor& t) {
    const auto [it, fresh] = ids.emplace(std::make_pair(t.raw(), t.byte_size()), ids.size());
    if (fresh) parts.push_back(hex(hash128(t.raw(), t.byte_size())));
    return it->second;
  });
  parts.push_back(w.take());
  return hash_parts(parts);
}

ModelCache::ModelCache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (!std::filesystem::is_directory(dir_, ec))
    throw Error(cat("cache_dir '", dir_, "' is not a folder kiln can create or use", ec ? cat(": ", ec.message()) : ""));
}

std::string ModelCache::path_for(const std::string& key) const {
  return (std::filesystem::path(dir_) / (key + ".kilncache")).string();
}

std::string ModelCache::file_digest(const std::string& path) const {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  struct stat st {};
  if (ec || ::stat(abs.c_str(), &st) != 0) return hash_file(path);  // hash_file says what is wrong
  const std::string facts = cat(abs, "\n", st.st_dev, " ", st.st_ino, " ", st.st_size, " ", st.st_mtim.tv_sec, ".",
                                st.st_mtim.tv_nsec, " ", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
  const std::filesystem::path dir = std::filesystem::path(dir_) / "digests";
  const std::filesystem::path record = dir / (hash_parts({abs}) + ".digest");
  {  // the record: facts, the hash, and a hash of both
    std::ifstream in(record, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t a = text.rfind('\n'), b = a == std::string::npos || a == 0 ? std::string::npos : text.rfind('\n', a - 1);
    if (b != std::string::npos && text.compare(0, b, facts) == 0 && b == facts.size()) {
      const std::string digest = text.substr(b + 1, a - b - 1), check = text.substr(a + 1);
      if (digest.size() == 32 && check == hash_parts({facts, digest})) return digest;
    }
  }
  const std::string digest = hash_file(abs);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  if (std::chrono::duration_cast<std::chrono::seconds>(now).count() - st.st_ctim.tv_sec >= 2) {
    std::filesystem::create_directories(dir, ec);
    const std::string tmp = cat(record.string(), ".tmp.", ::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << facts << "\n" << digest << "\n" << hash_parts({facts, digest});
    }
    if (std::rename(tmp.c_str(), record.c_str()) != 0) ::unlink(tmp.c_str());  // best effort: only a memo
  }
  return digest;
}

void ModelCache::save(const std::string& key, const CachedPlan& plan, const WeightsCache& weights) const {
  // metadata, with every tensor placed in the data region
  std::vector<Blob> blobs;
  std::map<std::pair<const void*, uint64_t>, uint64_t> blob_of;  // (address, bytes) -> index
  uint64_t data_bytes = 0;
  auto place = [&](const void* p, uint64_t bytes) {
    const auto [it, fresh] = blob_of.emplace(std::make_pair(p, bytes), blobs.size());
    if (fresh) {
      blobs.push_back({p, bytes, data_bytes});
      data_bytes = align_up(data_bytes + bytes, kAlign);
    }
    return it->second;
  };
  // the graph first (it places the tensors), then the packed weights whose source is one of
  // its tensors (others are made again on load)
  ir::ByteWriter graph;
  ir::write_graph(*plan.graph, graph, [&](const Tensor& t) { return place(t.raw(), t.byte_size()); });
  std::vector<WeightsCache::Packed> packed;
  for (WeightsCache::Packed& p : weights.snapshot())
    if (blob_of.count({p.source.raw(), p.source.byte_size()}) && p.desc.data.format_kind == dnnl_blocked)
      packed.push_back(std::move(p));
  // in a fixed order (the weights cache's is by address): the same compile writes the same file
  auto packed_order = [&](const WeightsCache::Packed& p) {
    return std::make_tuple(blob_of.at({p.source.raw(), p.source.byte_size()}), p.key,
                           std::string_view(reinterpret_cast<const char*>(&p.desc.data), sizeof p.desc.data));
  };
  std::sort(packed.begin(), packed.end(),
            [&](const auto& a, const auto& b) { return packed_order(a) < packed_order(b); });
  std::vector<uint64_t> packed_blob;
  for (const WeightsCache::Packed& p : packed) packed_blob.push_back(place(p.packed.get_data_handle(), p.desc.get_size()));

  ir::ByteWriter meta;
  meta.str(key);
  meta.u64(plan.shapes.size());
  for (const Shape& s : plan.shapes) {
    meta.u64(s.size());
    for (int64_t d : s) meta.i64(d);
  }
  meta.u64(blobs.size());
  for (const Blob& b : blobs) {
    meta.u64(b.offset);
    meta.u64(b.bytes);
  }
  meta.str(graph.bytes());
  write_log(meta, plan.log);
  meta.u64(packed.size());
  for (size_t i = 0; i < packed.size(); ++i) {
    const WeightsCache::Packed& p = packed[i];
    meta.u64(blob_of.at({p.source.raw(), p.source.byte_size()}));
    meta.str(p.key);
    meta.str(std::string_view(reinterpret_cast<const char*>(&p.desc.data), sizeof p.desc.data));
    meta.u64(packed_blob[i]);
  }
  meta.u64(plan.notes.size());
  for (const auto& [name, value] : plan.notes) {
    meta.str(name);
    meta.str(value);
  }
  const std::string m = meta.take();

  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format_version = kFormatVersion;
  h.meta_bytes = m.size();
  h.data_bytes = data_bytes;
  h.chunk_bytes = kChunkBytes;
  h.chunks = (data_bytes + kChunkBytes - 1) / kChunkBytes;
  h.data_offset = align_up(sizeof(Header) + h.chunks * sizeof(Hash128) + m.size(), kPage);

  const std::string path = path_for(key);
  const std::string tmp = cat(path, ".tmp.", ::getpid(), ".", std::hash<std::thread::id>()(std::this_thread::get_id()));
  Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (f.fd < 0) throw Error(cat("model cache: cannot write '", tmp, "': ", std::strerror(errno)));
  try {
    // the data region chunk by chunk: assembled in a buffer, hashed, written
    std::vector<Hash128> table(h.chunks);
    std::vector<char> chunk;
    size_t next_blob = 0;
    for (uint64_t c = 0; c < h.chunks; ++c) {
      const uint64_t begin = c * kChunkBytes, end = std::min(begin + kChunkBytes, data_bytes);
      chunk.assign(static_cast<size_t>(end - begin), 0);
      for (size_t b = next_blob; b < blobs.size() && blobs[b].offset < end; ++b) {
        const uint64_t lo = std::max(blobs[b].offset, begin), hi = std::min(blobs[b].offset + blobs[b].bytes, end);
        if (lo < hi)
          std::memcpy(chunk.data() + (lo - begin), static_cast<const char*>(blobs[b].data) + (lo - blobs[b].offset),
                      static_cast<size_t>(hi - lo));
        if (blobs[b].offset + blobs[b].bytes <= end) next_blob = b + 1;
      }
      table[c] = hash128(chunk.data(), chunk.size());
      write_all(f.fd, chunk.data(), chunk.size(), h.data_offset + begin, tmp);
    }
    h.table_hash = hash128(table.data(), table.size() * sizeof(Hash128));
    h.meta_hash = hash128(m.data(), m.size());
    h.header_hash = header_hash(h);
    write_all(f.fd, &h, sizeof h, 0, tmp);
    write_all(f.fd, table.data(), table.size() * sizeof(Hash128), sizeof h, tmp);
    write_all(f.fd, m.data(), m.size(), sizeof h + table.size() * sizeof(Hash128), tmp);
    if (data_bytes == 0 && ::ftruncate(f.fd, static_cast<off_t>(h.data_offset)) != 0)
      throw Error(cat("model cache: cannot write '", tmp, "': ", std::strerror(errno)));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(cat("model cache: cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno)));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::optional<CachedPlan> ModelCache::load(const std::string& key, std::string* why) const {
  const std::string path = path_for(key);
  why->clear();
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno != ENOENT) *why = cat("cannot open it: ", std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    *why = cat("cannot read it: ", std::strerror(errno));
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Header h{};
  if (size < sizeof h || !read_all(f.fd, &h, sizeof h, 0) || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    *why = "not a kiln model cache file";
    return std::nullopt;
  }
  if (!(header_hash(h) == h.header_hash)) {
    *why = "its header is damaged (checksum mismatch)";
    return std::nullopt;
  }
  if (h.format_version != kFormatVersion) {
    *why = cat("written in cache format ", h.format_version, ", this kiln reads ", kFormatVersion);
    return std::nullopt;
  }
  const uint64_t table_bytes = h.chunks * sizeof(Hash128);
  if (h.chunk_bytes != kChunkBytes || h.chunks != (h.data_bytes + kChunkBytes - 1) / kChunkBytes ||
      h.data_offset % kPage != 0 || h.data_offset < sizeof h + table_bytes + h.meta_bytes ||
      size != h.data_offset + h.data_bytes) {
    *why = cat("truncated or damaged: ", size, " bytes, its header describes ", h.data_offset + h.data_bytes);
    return std::nullopt;
  }
  std::vector<Hash128> table(h.chunks);
  std::string m(h.meta_bytes, '\0');
  if (!read_all(f.fd, table.data(), table_bytes, sizeof h) || !read_all(f.fd, m.data(), m.size(), sizeof h + table_bytes)) {
    *why = "cannot read it";
    return std::nullopt;
  }
  if (!(hash128(table.data(), table_bytes) == h.table_hash) || !(hash128(m.data(), m.size()) == h.meta_hash)) {
    *why = "its metadata is damaged (checksum mismatch)";
    return std::nullopt;
  }
  std::shared_ptr<void> data;
  try {
    data = map_range(f.fd, h.data_offset, h.data_bytes, /*populate=*/false);
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;
  }
  const char* base = static_cast<const char*>(data.get());
  std::atomic<int64_t> bad{-1};
  parallel_for(static_cast<size_t>(h.chunks), hash_threads(), [&](size_t c) {
    const uint64_t begin = c * kChunkBytes, n = std::min(kChunkBytes, h.data_bytes - begin);
    if (!(hash128(base + begin, static_cast<size_t>(n)) == table[c])) bad.store(static_cast<int64_t>(c));
    // let go of the pages just read (nothing has written them: the file's own bytes come back
    // on the next touch), so only what the kernels use becomes resident, not the whole file
    ::madvise(const_cast<char*>(base) + begin, static_cast<size_t>(n), MADV_DONTNEED);
  });
  if (bad.load() >= 0) {
    *why = cat("its data is damaged (checksum mismatch in bytes ", h.data_offset + uint64_t(bad.load()) * kChunkBytes,
               "..", h.data_offset + std::min(uint64_t(bad.load() + 1) * kChunkBytes, h.data_bytes), ")");
    return std::nullopt;
  }

  // every hash matched: the metadata is what save() wrote (still read with bounds checks)
  try {
    ir::ByteReader r(m, cat("model cache '", path, "'"));
    if (r.str() != key) {
      *why = "written under another key";
      return std::nullopt;
    }
    CachedPlan plan;
    for (uint64_t i = 0, n = r.count(8); i < n; ++i) {
      Shape s(r.count(8));
      for (int64_t& d : s) d = r.i64();
      plan.shapes.push_back(std::move(s));
    }
    std::vector<std::pair<uint64_t, uint64_t>> places(r.count(16));
    for (auto& [offset, bytes] : places) {
      offset = r.u64();
      bytes = r.u64();
      if (offset > h.data_bytes || bytes > h.data_bytes - offset) r.fail("a tensor outside the data region");
    }
    auto at = [&](ir::ByteReader& in, uint64_t id, size_t bytes) -> char* {
      if (id >= places.size() || places[id].second != bytes) in.fail(cat("tensor ", id, " does not match its place"));
      return const_cast<char*>(base) + places[id].first;
    };
    std::vector<Tensor> by_blob(places.size());  // the graph's tensors, for the packed weights' sources
    {
      const std::string graph = r.str();
      ir::ByteReader gr(graph, cat("model cache '", path, "': graph"));
      plan.graph = ir::read_graph(gr, [&](uint64_t id, DType dt, const Shape& shape, size_t bytes) {
        Tensor t = Tensor::adopt(dt, shape, data, at(gr, id, bytes));
        by_blob[id] = t;
        return t;
      });
      if (!gr.done()) gr.fail("bytes after the graph");
    }
    plan.log = read_log(r);
    for (uint64_t i = 0, n = r.count(32); i < n; ++i) {
      CachedPlan::Packed p;
      const uint64_t source = r.u64();
      if (source >= by_blob.size() || !by_blob[source].defined()) r.fail("a packed weight of no graph tensor");
      p.source = by_blob[source];
      p.key = r.str();
      const std::string d = r.str();
      if (d.size() != sizeof(dnnl_memory_desc_t)) r.fail("a packed weight's layout of another oneDNN build");
      dnnl_memory_desc_t c;
      std::memcpy(&c, d.data(), sizeof c);
      if (c.format_kind != dnnl_blocked || c.ndims < 1 || c.ndims > DNNL_MAX_NDIMS)
        r.fail("a packed weight's layout kiln does not read");
      p.desc = dnnl::memory::desc(c);
      const uint64_t blob = r.u64();
      p.packed = dnnl::memory(p.desc, cpu_engine(), at(r, blob, p.desc.get_size()));
      plan.packed.push_back(std::move(p));
    }
    for (uint64_t i = 0, n = r.count(16); i < n; ++i) {
      std::string name = r.str();
      plan.notes.emplace_back(std::move(name), r.str());
    }
    if (!r.done()) r.fail("bytes after the end");
    return plan;
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;
  }
}

}  // namespace kiln::cpu
