// The stream framing shared by the server and the client: see framing.h.
#include "rpc/framing.h"

#include <cstring>

#include "common/clock.h"

namespace nvmf::rpc::detail {

uint64_t now_ms() { return MonotonicClock::instance().now_ns() / 1000000; }

std::string errno_text(int os_errno) {
  char buffer[128];
  return strerror_r(os_errno, buffer, sizeof(buffer));  // GNU: may return a static string
}

namespace {

bool is_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes that cannot continue a number or a literal (JSON's structural characters, a quote,
// whitespace): a bare scalar ends before them.
bool ends_bare_scalar(char c) {
  switch (c) {
    case '{':
    case '}':
    case '[':
    case ']':
    case ',':
    case ':':
    case '"':
      return true;
    default:
      return is_whitespace(c);
  }
}

bool starts_bare_scalar(char c) {
  return c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n';
}

}  // namespace

ScanResult ValueScanner::scan(std::string_view buffer) {
  while (position_ < buffer.size()) {
    const char c = buffer[position_];
    switch (kind_) {
      case Kind::none:
        if (is_whitespace(c)) break;
        begin_ = position_;
        if (c == '{' || c == '[') {
          kind_ = Kind::container;
          depth_ = 1;
        } else if (c == '"') {
          kind_ = Kind::string;
          in_string_ = true;
        } else if (starts_bare_scalar(c)) {
          kind_ = Kind::bare;
        } else {
          return {true, begin_, position_ + 1};
        }
        break;
      case Kind::container:
      case Kind::string:
        if (in_string_) {
          if (escape_) {
            escape_ = false;
          } else if (c == '\\') {
            escape_ = true;
          } else if (c == '"') {
            in_string_ = false;
            if (kind_ == Kind::string) return {true, begin_, position_ + 1};
          }
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if (c == '}' || c == ']') {
          if (--depth_ == 0) return {true, begin_, position_ + 1};
        }
        break;
      case Kind::bare:
        if (ends_bare_scalar(c)) return {true, begin_, position_};
        break;
    }
    ++position_;
  }
  // "42" or "true" at the very end of what arrived: complete if it parses (a client that
  // writes a bare scalar without a newline must still get its invalid_request answer).
  if (kind_ == Kind::bare) {
    std::string_view text = buffer.substr(begin_);
    if (Json::accept(text.begin(), text.end())) return {true, begin_, buffer.size()};
  }
  return {};
}

std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json error_response(const Json& id, int code, const std::string& message) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

}  // namespace nvmf::rpc::detail
