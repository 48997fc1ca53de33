#include "target/subsystem.h"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "common/sha1.h"
#include "target/controller.h"

namespace nvmf::target {

namespace {
// CNTLID range of the dynamic model: FFF0h..FFFFh are reserved (FFFFh/FFFEh mean "any").
constexpr uint16_t kCntlidMin = 1;
constexpr uint16_t kCntlidMax = 0xFFEF;

// The RFC 4122 name space ID (section 4.3) of derived namespace UUIDs,
// caeb27ae-9690-4892-83fc-6c7a2bfd288f: any fixed UUID serves; this one was drawn at random
// (version 4) once for this project. It must never change: every derived namespace UUID, and
// so what hosts know the namespaces by, would change with it.
constexpr bdev::Uuid kDerivedUuidNameSpace = {0xca, 0xeb, 0x27, 0xae, 0x96, 0x90, 0x48, 0x92,
                                              0x83, 0xfc, 0x6c, 0x7a, 0x2b, 0xfd, 0x28, 0x8f};

template <size_t kSize>
bool all_zero(const std::array<uint8_t, kSize>& bytes) noexcept {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t byte) { return byte == 0; });
}
}  // namespace

bdev::Uuid derived_namespace_uuid(std::string_view subnqn, uint32_t nsid,
                                  std::string_view bdev_name) noexcept {
  char nsid_text[10];  // 4294967295: ten digits at most
  const auto [nsid_end, error] = std::to_chars(nsid_text, nsid_text + sizeof(nsid_text), nsid);
  assert(error == std::errc());
  (void)error;
  const std::string_view nsid_decimal(nsid_text, static_cast<size_t>(nsid_end - nsid_text));
  return uuid_v5(kDerivedUuidNameSpace, {subnqn, "/", nsid_decimal, "/", bdev_name});
}

NamespaceIds namespace_ids(const NamespaceOpts& opts) noexcept {
  const bdev::Bdev& bdev = *opts.bdev;
  NamespaceIds ids;
  bool uuid_derived = false;
  if (opts.uuid_set) {
    ids.uuid = opts.uuid;
  } else if (!opts.derive_ids_subnqn.empty() && bdev.uuid_generated()) {
    ids.uuid = derived_namespace_uuid(opts.derive_ids_subnqn, opts.nsid, bdev.name());
    uuid_derived = true;
  } else {
    ids.uuid = bdev.uuid();
  }
  if (!all_zero(opts.nguid)) {
    ids.nguid = opts.nguid;
  } else if (!all_zero(bdev.nguid())) {
    ids.nguid = bdev.nguid();
  } else if (uuid_derived) {
    ids.nguid = ids.uuid;
  }
  ids.eui64 = all_zero(opts.eui64) ? bdev.eui64() : opts.eui64;
  return ids;
}

Namespace::Namespace(const NamespaceOpts& opts) noexcept
    : nsid_(opts.nsid), bdev_(opts.bdev), ids_(namespace_ids(opts)) {}

Subsystem::Subsystem(uint32_t id, const SubsystemOpts& opts, bool discovery,
                     uint32_t max_namespaces)
    : id_(id),
      nqn_(opts.nqn),
      serial_number_(opts.serial_number),
      model_number_(opts.model_number),
      discovery_(discovery),
      max_namespaces_(discovery ? 0 : max_namespaces),
      allow_any_host_(opts.allow_any_host),
      hosts_(opts.hosts) {
  namespaces_.resize(max_namespaces_);  // setup-path
}

Subsystem::~Subsystem() = default;

bool Subsystem::host_allowed(std::string_view hostnqn) const noexcept {
  if (allow_any_host_) return true;
  for (const std::string& host : hosts_) {
    if (host == hostnqn) return true;
  }
  return false;
}

Namespace* Subsystem::find_namespace(uint32_t nsid) const noexcept {
  if (nsid == 0 || nsid > namespaces_.size()) return nullptr;
  return namespaces_[nsid - 1].get();
}

Controller* Subsystem::find_controller(uint16_t cntlid) const noexcept {
  for (Controller* controller : controllers_) {
    if (controller->cntlid() == cntlid) return controller;
  }
  return nullptr;
}

uint16_t Subsystem::allocate_cntlid() noexcept {
  for (uint32_t tries = 0; tries < kCntlidMax; ++tries) {
    const uint16_t candidate = next_cntlid_;
    next_cntlid_ = candidate == kCntlidMax ? kCntlidMin : static_cast<uint16_t>(candidate + 1);
    if (find_controller(candidate) == nullptr) return candidate;
  }
  return 0;
}

}  // namespace nvmf::target
