// A bdev the e2e tests stall on demand: a delay bdev (on the test's clock) over a malloc base
// whose queue_depth_max makes the commands beyond it wait in the target's core, not in the
// bdev. Shared by the target's reliability tests and the host's timeout tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "bdev/delay_bdev.h"
#include "bdev/malloc_bdev.h"
#include "common/clock.h"

namespace nvmf::e2e {

struct StalledBdev {
  std::unique_ptr<bdev::Bdev> base;
  std::unique_ptr<bdev::Bdev> bdev;  // the delay bdev: what the namespace serves
  bdev::DelayBdev* delay = nullptr;  // stall() / release()

  // Fails the calling test (ASSERT) when a bdev cannot be made.
  void create(const std::string& name, uint64_t block_count, uint32_t queue_depth_max,
              const Clock& clock) {
    bdev::MallocBdevOpts base_opts;
    base_opts.name = name + "Base";
    base_opts.block_count = block_count;
    base_opts.queue_depth_max = queue_depth_max;
    auto made_base = bdev::create_malloc_bdev(base_opts);
    ASSERT_TRUE(made_base);
    base = std::move(*made_base);
    bdev::DelayBdevOpts delay_opts;
    delay_opts.name = name;
    delay_opts.clock = &clock;
    auto made = bdev::create_delay_bdev(delay_opts, *base);
    ASSERT_TRUE(made);
    bdev = std::move(*made);
    delay = bdev::as_delay_bdev(*bdev);
  }
  // Releases a stall, so that the target's teardown does not wait for the bdev.
  void release() {
    if (delay != nullptr) delay->release();
  }
  // After the target (and its channels of the delay bdev) is gone.
  void destroy() {
    delay = nullptr;
    bdev.reset();
    base.reset();
  }
};

}  // namespace nvmf::e2e
