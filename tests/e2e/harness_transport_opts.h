// Transport options for an RDMA target on a ReactorHarness (sim_target_fixture.h,
// host_fixture.h).
#pragma once

#include "transport_rdma/target_transport.h"

namespace nvmf::e2e {

// The harness's FakeClock stands still unless a test moves it, so the acceptor reads the CM
// channel and the devices' async events on every round instead of once per
// acceptor_poll_period_us (which would never come).
inline transport_rdma::RdmaTargetOpts harness_transport_opts(
    transport_rdma::RdmaTargetOpts opts = {}) {
  opts.acceptor_poll_period_us = 0;
  return opts;
}

}  // namespace nvmf::e2e
