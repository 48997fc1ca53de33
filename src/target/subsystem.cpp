#include "target/subsystem.h"

#include "target/controller.h"

namespace nvmf::target {

namespace {
// CNTLID range of the dynamic model: FFF0h..FFFFh are reserved (FFFFh/FFFEh mean "any").
constexpr uint16_t kCntlidMin = 1;
constexpr uint16_t kCntlidMax = 0xFFEF;
}  // namespace

Namespace::Namespace(const NamespaceOpts& opts) noexcept
    : nsid_(opts.nsid),
      bdev_(opts.bdev),
      uuid_(opts.uuid_set ? opts.uuid : opts.bdev->uuid()),
      nguid_(opts.nguid),
      eui64_(opts.eui64) {}

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
