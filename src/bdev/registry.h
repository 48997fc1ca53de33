// Name -> Bdev map for the target's configuration (JSON file, JSON-RPC). Owns its bdevs.
// Setup path only and not thread-safe: use it from the one configuration thread; reactors keep
// the Bdev* they were given and never look names up.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "bdev/bdev.h"

namespace nvmf::bdev {

class BdevRegistry {
 public:
  BdevRegistry() = default;
  // Destroys bdevs built on others (delay, error) before their bases.
  ~BdevRegistry();
  BdevRegistry(const BdevRegistry&) = delete;
  BdevRegistry& operator=(const BdevRegistry&) = delete;

  // Takes ownership. Errors: already_exists (a bdev with that name is registered; `bdev` is
  // destroyed), invalid_argument (null).
  [[nodiscard]] Result<void> add(std::unique_ptr<Bdev> bdev);
  // nullptr when absent.
  Bdev* find(std::string_view name) const noexcept;
  // Gives the bdev back to the caller. Errors: not_found; busy (channels are still open: close
  // them on their threads first; or another bdev is built on it: remove that one first).
  [[nodiscard]] Result<std::unique_ptr<Bdev>> remove(std::string_view name);

  size_t size() const noexcept { return bdevs_.size(); }
  // In name order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const auto& [name, bdev] : bdevs_) fn(*bdev);
  }

 private:
  std::map<std::string, std::unique_ptr<Bdev>, std::less<>> bdevs_;
};

}  // namespace nvmf::bdev
