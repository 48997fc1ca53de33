// nvmf_perf: an NVMe-over-Fabrics RDMA and local NVMe PCIe load generator, like spdk_nvme_perf.
//
//   nvmf_perf (-r TRID | --sim) -w read|write|randread|randwrite|rw|randrw [-M READ_PERCENT]
//             [-q DEPTH] [-o BYTES] [-t SECONDS] [-d IOS] [-c WORKERS] [-P QPAIRS_PER_WORKER]
//             [--ns-count N] [--verify]
//             [--memreg POLICY | --memreg-switch-every SECONDS | --memreg-switch-every-ios N
//              [--memreg-switch-policies A,B,..]]
//             [--json FILE] [--sim-bdev null|malloc|nvme] [--sim-profile P]
//             [--sim-remote-invalidate on|off] [--sim-send-fence profile|reads|key-updates]
//             [--sim-payload copy|skip]
//             [--sim-race-one-in N (mlx5-2017-rare)] [--sim-bdev-size-mib MIB] ...
//
// TRID: 'trtype:RDMA traddr:10.0.0.1 trsvcid:4420 subnqn:nqn...' (NVMe-oF over RDMA), or
// 'trtype:PCIe traddr:0000:01:00.0' (a local controller bound to vfio-pci, through the
// userspace driver; hugepages from scripts/setup.sh), or 'trtype:PCIe traddr:model' (the
// in-process NVMe controller model: --ns-count namespaces of --sim-bdev-size-mib, 64 MiB).
// Besides IOPS, MiB/s and latency it reports the process CPU time per I/O, on the RDMA path
// the work per I/O (WRs by opcode, signaled and fenced ones, doorbells, CQEs; with --sim the
// simulated HCAs' work steps), and on the PCIe path the bytes copied through bounce buffers
// (0: every buffer is DMA memory).
//
// Exit status: 0 no I/O errors and no verify failures, 1 otherwise (or the target / device
// could not be reached), 2 bad usage.
#include <cstdio>
#include <string>

#include "options.h"
#include "run.h"

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
