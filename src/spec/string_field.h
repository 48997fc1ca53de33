// Fixed-width text fields, both directions, always bounded by the field size:
//  - space-padded ASCII (Identify Controller SN, MN, FR; discovery TRSVCID/TRADDR are
//    NUL-padded and use the NUL helpers): no terminator on the wire;
//  - NUL-terminated text inside a fixed field (NQNs in 256 bytes): the writer always leaves a
//    terminator; the reader never reads past the field, terminator or not.
// Plus a deliberately simple NQN validity check. Header-only; any thread. The fills are
// std::copy_n / std::fill_n: constexpr, and memmove / memset at run time (each discovery log
// entry pads 544 bytes of text fields).
//
// Sources: Base spec "Identify Controller Data Structure" (SN/MN/FR "ASCII string ... padded
// with spaces"), "NVM Qualified Names" (NQN format and the 223-byte limit).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nvmf::spec {

// --- Space-padded fields (SN, MN, FR) ---

// Copies `text` into `field` and pads the rest with spaces. Returns false when `text` did not
// fit (the field then holds its first `size` bytes).
constexpr bool put_space_padded(char* field, size_t size, std::string_view text) noexcept {
  const size_t copied = text.size() < size ? text.size() : size;
  std::fill_n(std::copy_n(text.data(), copied, field), size - copied, ' ');
  return copied == text.size();
}

// The text of a space-padded field: up to the first NUL (some devices NUL-pad), trailing spaces
// trimmed. A view into `field`; never reads past `size`.
constexpr std::string_view get_space_padded(const char* field, size_t size) noexcept {
  size_t length = 0;
  while (length < size && field[length] != '\0') ++length;
  while (length > 0 && field[length - 1] == ' ') --length;
  return std::string_view(field, length);
}

// --- NUL-terminated fields (NQNs, TRADDR, TRSVCID) ---

// Copies `text` and fills the rest of the field with NULs. `text` must leave room for the
// terminator (size <= field size - 1) and contain no NUL; otherwise the field is zeroed (an
// empty string, never a truncated identity) and false is returned.
constexpr bool put_nul_padded(char* field, size_t size, std::string_view text) noexcept {
  const bool fits = text.size() < size && text.find('\0') == std::string_view::npos;
  const size_t copied = fits ? text.size() : 0;
  std::fill_n(std::copy_n(text.data(), copied, field), size - copied, '\0');
  return fits;
}

// True when the field holds a NUL within its `size` bytes.
constexpr bool is_nul_terminated(const char* field, size_t size) noexcept {
  for (size_t i = 0; i < size; ++i) {
    if (field[i] == '\0') return true;
  }
  return false;
}

// The text before the first NUL, or all `size` bytes when there is none (check
// is_nul_terminated() where a missing terminator is a protocol error). Never reads past `size`.
constexpr std::string_view get_nul_terminated(const char* field, size_t size) noexcept {
  size_t length = 0;
  while (length < size && field[length] != '\0') ++length;
  return std::string_view(field, length);
}

// Copies `text` into a C string buffer of `out_size` bytes (> 0), truncating if needed; always
// terminates. Returns the number of characters copied. For logging wire text.
constexpr size_t copy_to_c_string(std::string_view text, char* out, size_t out_size) noexcept {
  if (out_size == 0) return 0;
  const size_t copied = text.size() < out_size - 1 ? text.size() : out_size - 1;
  for (size_t i = 0; i < copied; ++i) out[i] = text[i];
  out[copied] = '\0';
  return copied;
}

// Array-reference forms, so the field size cannot be passed wrong.
template <size_t N>
constexpr bool put_space_padded(char (&field)[N], std::string_view text) noexcept {
  return put_space_padded(field, N, text);
}
template <size_t N>
constexpr std::string_view get_space_padded(const char (&field)[N]) noexcept {
  return get_space_padded(field, N);
}
template <size_t N>
constexpr bool put_nul_padded(char (&field)[N], std::string_view text) noexcept {
  return put_nul_padded(field, N, text);
}
template <size_t N>
constexpr bool is_nul_terminated(const char (&field)[N]) noexcept {
  return is_nul_terminated(field, N);
}
template <size_t N>
constexpr std::string_view get_nul_terminated(const char (&field)[N]) noexcept {
  return get_nul_terminated(field, N);
}
template <size_t N>
constexpr size_t copy_to_c_string(std::string_view text, char (&out)[N]) noexcept {
  return copy_to_c_string(text, out, N);
}

// --- NVMe Qualified Names ---

inline constexpr size_t nqn_field_size = 256;  // SUBNQN/HOSTNQN fields
inline constexpr size_t nqn_length_max = 223;  // bytes, excluding the terminator
inline constexpr std::string_view nqn_prefix = "nqn.";
inline constexpr std::string_view nqn_uuid_prefix = "nqn.2014-08.org.nvmexpress:uuid:";

namespace detail {
constexpr bool is_hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
constexpr bool is_decimal_digit(char c) noexcept { return c >= '0' && c <= '9'; }
}  // namespace detail

// A UUID in its 36-character text form 8-4-4-4-12 (hex digits, either case).
constexpr bool uuid_text_valid(std::string_view text) noexcept {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_position ? text[i] != '-' : !detail::is_hex_digit(text[i])) return false;
  }
  return true;
}

// A simple NQN check, enough to reject garbage at Connect and in configuration:
//  - 1..223 bytes, no NUL and no ASCII control characters (UTF-8 above 7Fh is allowed);
//  - either "nqn.2014-08.org.nvmexpress:uuid:" followed by a 36-character UUID,
//  - or "nqn." + "yyyy-mm." + at least one more character (the reverse domain and an
//    optional ":" suffix, not checked further). The discovery NQN is of this form.
// It does not check that the date is real or that the domain is well-formed.
constexpr bool nqn_valid(std::string_view nqn) noexcept {
  if (nqn.empty() || nqn.size() > nqn_length_max) return false;
  for (const char c : nqn) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) return false;
  }
  if (nqn.starts_with(nqn_uuid_prefix)) return uuid_text_valid(nqn.substr(nqn_uuid_prefix.size()));
  if (!nqn.starts_with(nqn_prefix)) return false;
  // "yyyy-mm." right after "nqn.", then something.
  const std::string_view date = nqn.substr(nqn_prefix.size());
  if (date.size() < 9) return false;
  for (size_t i = 0; i < 8; ++i) {
    const bool ok = i == 4   ? date[i] == '-'
                    : i == 7 ? date[i] == '.'
                             : detail::is_decimal_digit(date[i]);
    if (!ok) return false;
  }
  return true;
}

// What the Linux kernel target takes as a subsystem name (any configfs directory name):
// 1..223 bytes without NUL or ASCII control characters. A subsystem NQN that passes this but
// not nqn_valid() is accepted with a warning, so configurations move over from nvmet
// unchanged; hosts see it as it is.
constexpr bool subsystem_name_acceptable(std::string_view nqn) noexcept {
  if (nqn.empty() || nqn.size() > nqn_length_max) return false;
  for (const char c : nqn) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == '/') return false;
  }
  return true;
}

// An NQN field (256 bytes) is valid when it is NUL-terminated and its text is a valid NQN.
constexpr bool nqn_field_valid(const char* field, size_t size) noexcept {
  return is_nul_terminated(field, size) && nqn_valid(get_nul_terminated(field, size));
}
template <size_t N>
constexpr bool nqn_field_valid(const char (&field)[N]) noexcept {
  return nqn_field_valid(field, N);
}

}  // namespace nvmf::spec
