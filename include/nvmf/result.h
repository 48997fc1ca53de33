// Result<T>: the return type of every fallible API call (setup, configuration, submission).
// Shaped like C++23 std::expected, which g++ 12 lacks in C++20, so that moving to it later
// is a rename. Wire errors are NVMe status values (src/spec), never Result; programmer
// errors assert. No allocation: an Error is an enum, an errno and a static string.
//
// Public API (libnvmf_host returns it); src/common/result.h forwards here for the rest of the
// stack. The five functions below are defined in src/common/result.cpp. Any thread.
#pragma once

#include <cassert>
#include <new>
#include <type_traits>
#include <utility>

#include "nvmf/export.h"

namespace nvmf {

// Portable error codes of the stack's own APIs. Each maps to the errno a C caller expects.
enum class Errc : int {
  ok = 0,
  invalid_argument,   // EINVAL: a parameter or option is out of range
  no_memory,          // ENOMEM: allocation or registration failed (names the knob in the log)
  busy,               // EBUSY/EAGAIN: a bounded queue or pool is full; retry after a poll
  not_found,          // ENOENT
  already_exists,     // EEXIST
  not_supported,      // ENOTSUP: the device or peer lacks a capability
  io_error,           // EIO: the device or transport failed the operation
  timed_out,          // ETIMEDOUT
  connection_refused, // ECONNREFUSED
  disconnected,       // ENOTCONN: the queue pair or connection is gone
  permission_denied,  // EACCES
  out_of_range,       // ERANGE
  bad_state,          // EPROTO-like: called in a state that does not allow it
  system_error,       // any other errno, kept in Error::os_errno
};

NVMF_API const char* errc_name(Errc code) noexcept;
NVMF_API int errc_to_errno(Errc code) noexcept;
NVMF_API Errc errno_to_errc(int os_errno) noexcept;

struct Error {
  Errc code = Errc::ok;
  int os_errno = 0;            // the errno behind the failure, 0 when none
  const char* detail = "";     // static string: what failed (never owns memory)

  constexpr Error() = default;
  constexpr Error(Errc c, const char* d = "", int e = 0) : code(c), os_errno(e), detail(d) {}
  friend constexpr bool operator==(const Error& a, const Error& b) {
    return a.code == b.code && a.os_errno == b.os_errno;
  }
};

// Builds an Error from errno as set by a failed system call.
NVMF_API Error make_system_error(int os_errno, const char* detail) noexcept;

// Describes an error in a caller buffer: "no_memory (ENOMEM: Cannot allocate memory): mmap".
NVMF_API const char* error_describe(const Error& error, char* buffer,
                                    unsigned buffer_size) noexcept;

// The value std::unexpected would wrap; lets `return Unexpected{...}` read like the standard.
struct Unexpected {
  Error error;
  constexpr explicit Unexpected(Error e) : error(e) {}
  constexpr explicit Unexpected(Errc c, const char* d = "", int e = 0) : error(c, d, e) {}
};

template <typename T>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  using error_type = Error;

  Result() requires std::is_default_constructible_v<T> : has_value_(true) { new (&value_) T(); }
  Result(const T& v) : has_value_(true) { new (&value_) T(v); }  // NOLINT: implicit like expected
  Result(T&& v) : has_value_(true) { new (&value_) T(std::move(v)); }  // NOLINT
  Result(Unexpected u) : has_value_(false) { new (&error_) Error(u.error); }  // NOLINT
  Result(Errc c) : has_value_(false) { new (&error_) Error(c); }  // NOLINT

  Result(const Result& o) : has_value_(o.has_value_) {
    if (has_value_) new (&value_) T(o.value_); else new (&error_) Error(o.error_);
  }
  Result(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : has_value_(o.has_value_) {
    if (has_value_) new (&value_) T(std::move(o.value_)); else new (&error_) Error(o.error_);
  }
  Result& operator=(Result o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    destroy();
    has_value_ = o.has_value_;
    if (has_value_) new (&value_) T(std::move(o.value_)); else new (&error_) Error(o.error_);
    return *this;
  }
  ~Result() { destroy(); }

  bool has_value() const noexcept { return has_value_; }
  explicit operator bool() const noexcept { return has_value_; }

  T& value() & { assert(has_value_); return value_; }
  const T& value() const& { assert(has_value_); return value_; }
  T&& value() && { assert(has_value_); return std::move(value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  template <typename U>
  T value_or(U&& fallback) const& { return has_value_ ? value_ : T(std::forward<U>(fallback)); }

  const Error& error() const { assert(!has_value_); return error_; }

 private:
  void destroy() noexcept {
    if (has_value_) value_.~T(); else error_.~Error();
  }
  bool has_value_;
  union {
    T value_;
    Error error_;
  };
};

template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  using error_type = Error;
  constexpr Result() = default;
  constexpr Result(Unexpected u) : has_value_(false), error_(u.error) {}  // NOLINT
  constexpr Result(Errc c) : has_value_(c == Errc::ok), error_(c) {}  // NOLINT
  constexpr bool has_value() const noexcept { return has_value_; }
  constexpr explicit operator bool() const noexcept { return has_value_; }
  constexpr void value() const { assert(has_value_); }
  constexpr const Error& error() const { assert(!has_value_); return error_; }

 private:
  bool has_value_ = true;
  Error error_{};
};

}  // namespace nvmf
