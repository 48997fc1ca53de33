// Building blocks shared by every wire-format header in src/spec: the little-endian host
// assumption, the layout-pinning macros, bit-field helpers for sub-byte fields, and byte-wise
// little-endian loads/stores for fields that sit at unaligned offsets (the 24-bit keyed SGL
// length, the 4-byte key at byte 11). Header-only, no dependencies, usable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

// NVMe is little-endian on the wire. Every struct in src/spec is a plain overlay of the wire
// bytes, so a big-endian host would need byte swaps on every field; we do not support one.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "src/spec overlays little-endian wire formats directly onto host integers");

namespace nvmf::spec {

// A wire struct can be memcpy'd to and from a buffer and has a layout the standard pins down.
template <typename T>
inline constexpr bool is_wire_struct_v =
    std::is_standard_layout_v<T>&& std::is_trivially_copyable_v<T>;

// Pins a wire struct: exact size, standard-layout, trivially copyable.
#define NVMF_SPEC_LAYOUT(type, size)                     \
  static_assert(sizeof(type) == (size), #type ": size"); \
  static_assert(::nvmf::spec::is_wire_struct_v<type>,    \
                #type ": must be standard-layout and trivially copyable")

// Pins one field offset.
#define NVMF_SPEC_OFFSET(type, field, offset) \
  static_assert(offsetof(type, field) == (offset), #type "." #field ": offset")

constexpr uint64_t low_mask(unsigned width) noexcept {
  return width >= 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
}

// The `width`-bit field that starts at bit `lsb` of `value`.
constexpr uint64_t get_bits(uint64_t value, unsigned lsb, unsigned width) noexcept {
  return (value >> lsb) & low_mask(width);
}

// `value` with the `width`-bit field at `lsb` replaced by `field` (excess high bits dropped).
template <typename T>
constexpr T set_bits(T value, unsigned lsb, unsigned width, uint64_t field) noexcept {
  static_assert(std::is_unsigned_v<T>);
  const uint64_t mask = low_mask(width) << lsb;
  return static_cast<T>((static_cast<uint64_t>(value) & ~mask) | ((field << lsb) & mask));
}

constexpr bool get_bit(uint64_t value, unsigned bit) noexcept { return ((value >> bit) & 1) != 0; }

template <typename T>
constexpr T set_bit(T value, unsigned bit, bool on) noexcept {
  return set_bits(value, bit, 1, on ? 1 : 0);
}

// Byte-wise little-endian access. Used for fields at offsets their type is not aligned to;
// byte-wise so that it is constexpr and never does an unaligned or aliasing load.
constexpr uint64_t load_le(const uint8_t* bytes, unsigned size) noexcept {
  uint64_t value = 0;
  for (unsigned i = 0; i < size; ++i) value |= uint64_t{bytes[i]} << (8 * i);
  return value;
}

constexpr void store_le(uint8_t* bytes, unsigned size, uint64_t value) noexcept {
  for (unsigned i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

constexpr uint16_t load_le16(const uint8_t* bytes) noexcept {
  return static_cast<uint16_t>(load_le(bytes, 2));
}
constexpr uint32_t load_le24(const uint8_t* bytes) noexcept {
  return static_cast<uint32_t>(load_le(bytes, 3));
}
constexpr uint32_t load_le32(const uint8_t* bytes) noexcept {
  return static_cast<uint32_t>(load_le(bytes, 4));
}
constexpr uint64_t load_le64(const uint8_t* bytes) noexcept { return load_le(bytes, 8); }

constexpr void store_le16(uint8_t* bytes, uint16_t value) noexcept { store_le(bytes, 2, value); }
constexpr void store_le24(uint8_t* bytes, uint32_t value) noexcept { store_le(bytes, 3, value); }
constexpr void store_le32(uint8_t* bytes, uint32_t value) noexcept { store_le(bytes, 4, value); }
constexpr void store_le64(uint8_t* bytes, uint64_t value) noexcept { store_le(bytes, 8, value); }

// A 128-bit little-endian counter (SMART data units, capacities): low 64 bits first.
struct Uint128 {
  uint64_t low;
  uint64_t high;
};
NVMF_SPEC_LAYOUT(Uint128, 16);
NVMF_SPEC_OFFSET(Uint128, high, 8);

}  // namespace nvmf::spec
