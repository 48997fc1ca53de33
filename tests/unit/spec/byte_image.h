// Test helpers for exact-byte checks: the bytes of a wire struct, and an expected image built
// by hand from the spec layout (zeroes, with values poked in at their spec offsets).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace nvmf::spec::test {

template <typename T>
std::vector<uint8_t> bytes_of(const T& value) {
  std::vector<uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

template <typename T>
T from_bytes(const std::vector<uint8_t>& bytes) {
  T value;
  EXPECT_EQ(bytes.size(), sizeof(T));
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// An expected byte image of `size` zero bytes with fields written in by offset.
class ByteImage {
 public:
  explicit ByteImage(size_t size) : bytes_(size, 0) {}
  ByteImage& at(size_t offset, std::initializer_list<uint8_t> values) {
    EXPECT_LE(offset + values.size(), bytes_.size());
    size_t i = offset;
    for (uint8_t value : values) bytes_.at(i++) = value;
    return *this;
  }
  ByteImage& text(size_t offset, std::string_view chars) {
    EXPECT_LE(offset + chars.size(), bytes_.size());
    for (size_t i = 0; i < chars.size(); ++i)
      bytes_.at(offset + i) = static_cast<uint8_t>(chars[i]);
    return *this;
  }
  ByteImage& fill(size_t offset, size_t count, uint8_t value) {
    for (size_t i = 0; i < count; ++i) bytes_.at(offset + i) = value;
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Equal sizes and bytes; on mismatch names the first differing offsets.
inline ::testing::AssertionResult SameBytes(const std::vector<uint8_t>& actual,
                                            const std::vector<uint8_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  auto failure = ::testing::AssertionFailure();
  int mismatches = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      if (mismatches < 8) {
        char line[64];
        std::snprintf(line, sizeof(line), "byte %zu: %02Xh != expected %02Xh\n", i, actual[i],
                      expected[i]);
        failure << line;
      }
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return failure << mismatches << " byte(s) differ";
}

inline ::testing::AssertionResult SameBytes(const std::vector<uint8_t>& actual,
                                            const ByteImage& expected) {
  return SameBytes(actual, expected.bytes());
}

}  // namespace nvmf::spec::test
