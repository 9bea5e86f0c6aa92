#pragma once
// A directory of a test's own for the files it writes, removed with everything in it when the
// test ends: <system temp>/kiln_test_<pid>_<n>_<name>, so parallel runs and repeated tests
// never share one, and nothing stays behind.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::test {

class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("kiln_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedTempDir() {
    std::error_code ec;  // never throws from a destructor; a file still open is left to the OS
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& file) const { return path_ / file; }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::test
