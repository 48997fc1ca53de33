// Test support shared by every layer's tests: captures log lines for the lifetime of the object
// so a test can assert that an error was reported (and says what it should).
#pragma once

#include <string>
#include <vector>

#include "common/log.h"

namespace nvmf::test {

class LogCapture {
 public:
  LogCapture() { log_set_sink(&LogCapture::sink, this); }
  ~LogCapture() { log_reset_sink(); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  bool contains(const std::string& text) const {
    for (const std::string& line : lines_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  const std::vector<std::string>& lines() const { return lines_; }
  void clear() { lines_.clear(); }

 private:
  static void sink(LogLevel, const char*, const char* line, void* ctx) {
    static_cast<LogCapture*>(ctx)->lines_.emplace_back(line);
  }
  std::vector<std::string> lines_;
};

}  // namespace nvmf::test
