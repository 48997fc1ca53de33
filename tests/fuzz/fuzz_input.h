// Shared by the fuzz targets: a front-to-back reader over libFuzzer's input (reads past the
// end give zeroes, so every input is a valid program for a harness and the seed files in
// corpus/ are easy to write: fields in the order a harness takes them), the check that
// turns a broken invariant into a crash libFuzzer records, and a log sink that drops lines
// (every log call still formats its arguments, so bad format arguments are still caught).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/log.h"

namespace nvmf::fuzz {

// A broken invariant: print what and where, then abort, which libFuzzer reports as a crash
// and saves the input for (crash-<sha1>, replayed with `fuzz_NAME crash-<sha1>`).
[[noreturn]] inline void check_failed(const char* condition, const char* file, int line,
                                      const char* detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s (%s:%d)%s%s\n", condition, file, line,
               detail[0] != '\0' ? ": " : "", detail);
  std::abort();
}

#define FUZZ_CHECK(condition)                                                         \
  do {                                                                                \
    if (!(condition)) ::nvmf::fuzz::check_failed(#condition, __FILE__, __LINE__, ""); \
  } while (0)
#define FUZZ_CHECK_MSG(condition, detail)                                                   \
  do {                                                                                      \
    if (!(condition)) ::nvmf::fuzz::check_failed(#condition, __FILE__, __LINE__, (detail)); \
  } while (0)

class Input {
 public:
  Input(const uint8_t* data, size_t size) noexcept : data_(data), size_(size) {}

  size_t remaining() const noexcept { return size_ - offset_; }
  bool empty() const noexcept { return offset_ == size_; }

  // Little-endian, as the NVMe structures the seeds are made of.
  template <typename T>
  T take() noexcept {
    T value{};
    take_bytes(&value, sizeof(value));
    return value;
  }
  uint8_t byte() noexcept { return take<uint8_t>(); }
  bool flag() noexcept { return (byte() & 1) != 0; }

  // Copies up to `size` bytes; the rest of `to` becomes zeroes. Returns the bytes taken.
  size_t take_bytes(void* to, size_t size) noexcept {
    const size_t n = size < remaining() ? size : remaining();
    if (n != 0) std::memcpy(to, data_ + offset_, n);
    if (n < size) std::memset(static_cast<uint8_t*>(to) + n, 0, size - n);
    offset_ += n;
    return n;
  }
  // `size` bytes (zero-padded past the end) in a buffer of exactly that size, so that
  // AddressSanitizer sees a read one byte past it.
  std::vector<uint8_t> take_vector(size_t size) {
    std::vector<uint8_t> out(size);
    take_bytes(out.data(), size);
    return out;
  }
  // Everything that is left.
  std::string_view rest() noexcept {
    std::string_view out(reinterpret_cast<const char*>(data_ + offset_), remaining());
    offset_ = size_;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// Log lines are formatted and dropped: the fuzzers run millions of inputs that each log a
// warning or two. With NVMF_FUZZ_LOG set (to a level: error ... debug) they go to stderr
// instead, to see what one input does. Call from LLVMFuzzerInitialize.
inline void drop_log_lines() {
  LogLevel level = LogLevel::debug;
  if (const char* wanted = std::getenv("NVMF_FUZZ_LOG"); wanted != nullptr) {
    if (!log_level_parse(wanted, &level)) level = LogLevel::debug;
    log_set_level(level);
    return;
  }
  log_set_level(level);
  log_set_sink([](LogLevel, const char*, const char*, void*) {}, nullptr);
}

}  // namespace nvmf::fuzz
