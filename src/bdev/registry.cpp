#include "bdev/registry.h"

#include "bdev/bdev_internal.h"

namespace nvmf::bdev {

BdevRegistry::~BdevRegistry() {
  // A bdev on top of another (delay, error) releases its claim on the base when destroyed, so
  // it must go first: each pass destroys the unclaimed ones, which frees their bases for the
  // next. Claims form chains, never cycles, so every pass destroys at least one.
  while (!bdevs_.empty()) {
    const size_t before = bdevs_.size();
    std::erase_if(bdevs_, [](const auto& entry) { return entry.second->claimed_by() == nullptr; });
    assert(bdevs_.size() < before && "claim cycle among registered bdevs");
    if (bdevs_.size() == before) break;
  }
}

Result<void> BdevRegistry::add(std::unique_ptr<Bdev> bdev) {
  if (bdev == nullptr) return Unexpected(Errc::invalid_argument, "bdev is null");
  auto [position, inserted] = bdevs_.try_emplace(bdev->name(), nullptr);
  if (!inserted) {
    NVMF_ERRLOG(bdev, "bdev '%s' already exists", bdev->name().c_str());
    return Unexpected(Errc::already_exists, "bdev name");
  }
  position->second = std::move(bdev);
  return {};
}

Bdev* BdevRegistry::find(std::string_view name) const noexcept {
  auto position = bdevs_.find(name);
  return position == bdevs_.end() ? nullptr : position->second.get();
}

Result<std::unique_ptr<Bdev>> BdevRegistry::remove(std::string_view name) {
  auto position = bdevs_.find(name);
  if (position == bdevs_.end()) return Unexpected(Errc::not_found, "bdev name");
  if (const Bdev* user = position->second->claimed_by(); user != nullptr) {
    NVMF_ERRLOG(bdev, "bdev '%s' is the base of bdev '%s': remove that one first",
                position->first.c_str(), user->name().c_str());
    return Unexpected(Errc::busy, "bdev is the base of another bdev");
  }
  if (position->second->channel_count() != 0) {
    NVMF_ERRLOG(bdev, "bdev '%s' still has %zu open channels", position->first.c_str(),
                position->second->channel_count());
    return Unexpected(Errc::busy, "bdev has open channels");
  }
  std::unique_ptr<Bdev> bdev = std::move(position->second);
  bdevs_.erase(position);
  return bdev;
}

}  // namespace nvmf::bdev
