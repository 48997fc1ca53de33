// Helpers shared by the env unit tests: a temporary directory and a log capture.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/log.h"
#include "log_capture.h"

namespace nvmf::env::testing {

// mkdtemp under /tmp, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "nvmf_env_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `contents` to path()/relative, creating parent directories.
  std::string write(const std::string& relative, const std::string& contents) const {
    std::filesystem::path file = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << contents;
    return file.string();
  }
  std::string make_dir(const std::string& relative) const {
    std::filesystem::path dir = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(dir);
    return dir.string();
  }

 private:
  std::string path_;
};

// A /proc/meminfo look-alike with the fields the posix backend reads.
inline std::string fake_meminfo(size_t hugepages_total, size_t hugepages_free,
                                size_t mem_available_kb = 8 * 1024 * 1024) {
  return "MemTotal:       16000000 kB\n"
         "MemFree:        8000000 kB\n"
         "MemAvailable:   " +
         std::to_string(mem_available_kb) +
         " kB\n"
         "HugePages_Total:    " +
         std::to_string(hugepages_total) +
         "\n"
         "HugePages_Free:     " +
         std::to_string(hugepages_free) +
         "\n"
         "HugePages_Rsvd:        0\n"
         "Hugepagesize:       2048 kB\n";
}

using test::LogCapture;  // tests/support/log_capture.h

}  // namespace nvmf::env::testing
