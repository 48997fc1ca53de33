// A batch of work completions on the stack for one CQ poll to fill (STYLE 4: reap a budget of
// completions per poll into a stack array), left uninitialized: `verbs::WorkCompletion
// wcs[32]` runs the struct's member defaults for all 32 on every poll, a 1 KiB memset each
// time. WorkCompletion is an aggregate, an implicit-lifetime type, which the byte array's
// storage creates objects of (C++20 [intro.object]); read only the entries the poll filled.
// Header-only; the owner's thread.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

#include "verbs/verbs.h"

namespace nvmf::transport_rdma {

template <size_t N>
class CompletionBatch {
  static_assert(std::is_trivially_copyable_v<verbs::WorkCompletion> &&
                std::is_trivially_destructible_v<verbs::WorkCompletion>);

 public:
  CompletionBatch() noexcept {}  // not `= default`, which would value-initialize the storage
  CompletionBatch(const CompletionBatch&) = delete;
  CompletionBatch& operator=(const CompletionBatch&) = delete;

  // Take it once per poll: std::launder keeps the compiler from caching what it points at.
  verbs::WorkCompletion* data() noexcept {
    return std::launder(reinterpret_cast<verbs::WorkCompletion*>(bytes_));
  }
  static constexpr size_t size() noexcept { return N; }

 private:
  alignas(verbs::WorkCompletion) unsigned char bytes_[sizeof(verbs::WorkCompletion) * N];
};

}  // namespace nvmf::transport_rdma
