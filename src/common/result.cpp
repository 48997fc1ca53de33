#include "common/result.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nvmf {

namespace {
struct ErrcInfo {
  Errc code;
  const char* name;
  int os_errno;
};
// One row per Errc, in enum order; errno_to_errc scans it backwards from a given errno.
constexpr ErrcInfo kErrcTable[] = {
    {Errc::ok, "ok", 0},
    {Errc::invalid_argument, "invalid_argument", EINVAL},
    {Errc::no_memory, "no_memory", ENOMEM},
    {Errc::busy, "busy", EBUSY},
    {Errc::not_found, "not_found", ENOENT},
    {Errc::already_exists, "already_exists", EEXIST},
    {Errc::not_supported, "not_supported", ENOTSUP},
    {Errc::io_error, "io_error", EIO},
    {Errc::timed_out, "timed_out", ETIMEDOUT},
    {Errc::connection_refused, "connection_refused", ECONNREFUSED},
    {Errc::disconnected, "disconnected", ENOTCONN},
    {Errc::permission_denied, "permission_denied", EACCES},
    {Errc::out_of_range, "out_of_range", ERANGE},
    {Errc::bad_state, "bad_state", EPROTO},
    {Errc::system_error, "system_error", 0},
};
static_assert(sizeof(kErrcTable) / sizeof(kErrcTable[0]) ==
                  static_cast<size_t>(Errc::system_error) + 1,
              "kErrcTable must have one row per Errc");
}  // namespace

const char* errc_name(Errc code) noexcept {
  auto index = static_cast<size_t>(code);
  if (index >= sizeof(kErrcTable) / sizeof(kErrcTable[0])) return "unknown";
  return kErrcTable[index].name;
}

int errc_to_errno(Errc code) noexcept {
  auto index = static_cast<size_t>(code);
  if (index >= sizeof(kErrcTable) / sizeof(kErrcTable[0])) return EIO;
  return kErrcTable[index].os_errno;
}

Errc errno_to_errc(int os_errno) noexcept {
  if (os_errno == 0) return Errc::ok;
  if (os_errno == EAGAIN) return Errc::busy;  // EWOULDBLOCK is the same value on Linux
  if (os_errno == EPERM) return Errc::permission_denied;
  for (const auto& row : kErrcTable) {
    if (row.os_errno == os_errno) return row.code;
  }
  return Errc::system_error;
}

Error make_system_error(int os_errno, const char* detail) noexcept {
  return Error(errno_to_errc(os_errno), detail, os_errno);
}

const char* error_describe(const Error& error, char* buffer, unsigned buffer_size) noexcept {
  if (buffer_size == 0) return buffer;
  if (error.os_errno != 0) {
    char errno_text[128];
    // GNU strerror_r returns a pointer that may or may not be errno_text.
    const char* text = strerror_r(error.os_errno, errno_text, sizeof(errno_text));
    snprintf(buffer, buffer_size, "%s (errno %d: %s)%s%s", errc_name(error.code), error.os_errno,
             text, error.detail[0] ? ": " : "", error.detail);
  } else {
    snprintf(buffer, buffer_size, "%s%s%s", errc_name(error.code), error.detail[0] ? ": " : "",
             error.detail);
  }
  return buffer;
}

}  // namespace nvmf
