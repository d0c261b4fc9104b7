// Scratch space for tests that write files: a fresh directory under the tests' temporary
// directory, removed with its contents when the test ends (passed, failed or skipped). Its
// name carries the process id and a count, so reruns leave nothing in /tmp and two suites
// running at once on one machine never share a file.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace topocoll::testing_support {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : owner_(::getpid()),
        path_((std::filesystem::path(::testing::TempDir()) /
               (name + "_" + std::to_string(owner_) + "_" + std::to_string(next_number()))).string()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  // Only the process that made it removes it: a forked child that leaves through exit()
  // must not take the directory from under the test.
  ~ScratchDir() {
    std::error_code ignored;
    if (::getpid() == owner_) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // A path inside the directory (nothing is created).
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  static int next_number() {
    static std::atomic<int> count{0};
    return count++;
  }
  pid_t owner_;
  std::string path_;
};

}  // namespace topocoll::testing_support
