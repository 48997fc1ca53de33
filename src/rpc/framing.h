// Internal to src/rpc (server, client and their tests): where one JSON value ends in a byte
// stream, and the few response texts both sides build. Not part of the library's contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rpc/rpc.h"

namespace nvmf::rpc::detail {

// Small helpers server and client share.
uint64_t now_ms();
std::string errno_text(int os_errno);
inline void set_message(std::string* message, std::string text) {
  if (message) *message = std::move(text);
}

struct ScanResult {
  bool complete = false;
  size_t begin = 0;  // the value's first byte (when complete)
  size_t end = 0;    // one past its last byte (when complete)
};

// Finds the end of the first JSON value in a stream without parsing it, so that requests may
// arrive in pieces, be pipelined, or be separated by whitespace:
//  - objects and arrays end at the bracket that balances the first one, counted outside
//    strings (with backslash escapes honoured);
//  - a string ends at its closing quote;
//  - a bare scalar (number, true, false, null) ends at the next delimiter, or at the end of
//    the buffer once the text there parses;
//  - any other first byte is a value of one byte, so that the parser reports it.
// Malformed text still completes somewhere; the caller's parser then rejects it. Incremental:
// scan() resumes where the previous call stopped, so the buffer must only grow between calls
// (reset() after consuming a value or clearing the buffer).
class ValueScanner {
 public:
  ScanResult scan(std::string_view buffer);
  // Whether a value has begun (leading whitespace skipped), and where.
  bool value_started() const noexcept { return begin_ != kNone; }
  size_t value_begin() const noexcept { return begin_; }
  void reset() noexcept { *this = ValueScanner{}; }

 private:
  enum class Kind : uint8_t {
    none,       // skipping whitespace before a value
    container,  // inside { } or [ ]: counting depth
    string,     // a top-level string
    bare,       // a number or literal
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t position_ = 0;  // next byte to look at
  size_t begin_ = kNone;
  size_t depth_ = 0;
  Kind kind_ = Kind::none;
  bool in_string_ = false;
  bool escape_ = false;  // the previous byte in a string was a backslash
};

// Compact JSON text; invalid UTF-8 in strings is replaced (U+FFFD) instead of throwing.
std::string dump(const Json& value);
// {"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":MESSAGE}}
Json error_response(const Json& id, int code, const std::string& message);

}  // namespace nvmf::rpc::detail
