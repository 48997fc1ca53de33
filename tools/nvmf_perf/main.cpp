// nvmf_perf: an NVMe-over-Fabrics RDMA load generator, like spdk_nvme_perf.
//
//   nvmf_perf (-r TRID | --sim) -w read|write|randread|randwrite|rw|randrw [-M READ_PERCENT]
//             [-q DEPTH] [-o BYTES] [-t SECONDS] [-c WORKERS] [--ns-count N] [--verify]
//             [--memreg POLICY] [--json FILE] [--sim-bdev null|malloc|nvme] [--sim-profile P]
//             [--sim-remote-invalidate on|off] ...
//
// Exit status: 0 no I/O errors and no verify failures, 1 otherwise, 2 bad usage.
#include <cstdio>
#include <string>

#include "common/log.h"
#include "options.h"
#include "run.h"

NVMF_LOG_COMPONENT(nvmf_perf);

int main(int argc, char** argv) {
  nvmf::perf::Options options;
  std::string error;
  switch (nvmf::perf::parse_command_line(argc, argv, &options, &error)) {
    case 0:
      break;
    case 1:
      return 0;  // --help
    default:
      std::fprintf(stderr, "nvmf_perf: %s (see --help)\n", error.c_str());
      return 2;
  }
  nvmf::perf::Settings settings;
  error = nvmf::perf::check_options(options, &settings);
  if (!error.empty()) {
    std::fprintf(stderr, "nvmf_perf: %s\n", error.c_str());
    return 2;
  }
  return nvmf::perf::run(settings);
}
