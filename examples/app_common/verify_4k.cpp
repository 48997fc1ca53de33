// verify_4k: an application of libnvmf_host, built out of tree against an installed copy
// (examples/app_cmake with find_package(nvmf), examples/app_pkgconfig with pkg-config).
// Connects to an NVMe-over-Fabrics RDMA subsystem, writes 4 KiB of a pattern, reads it back,
// compares, disconnects. Overwrites those 4 KiB of the namespace.
//
//   verify_4k --traddr ADDR [--trsvcid PORT] --subnqn NQN [--nsid N] [--lba LBA]
//
// Exit status: 0 verified, 1 a step failed (the message says which), 2 bad command line.
#include <nvmf/host.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

constexpr uint32_t kTransferBytes = 4096;

struct Options {
  std::string traddr;
  std::string trsvcid = "4420";
  std::string subnqn;
  uint32_t nsid = 1;
  uint64_t lba = 0;
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: verify_4k --traddr ADDR [--trsvcid PORT] --subnqn NQN [--nsid N] "
               "[--lba LBA]\n"
               "Connects over NVMe/RDMA, writes 4 KiB of a pattern at LBA (default 0) of\n"
               "namespace N (default 1), reads it back, compares and disconnects.\n"
               "  --traddr ADDR   target address (IPv4)\n"
               "  --trsvcid PORT  target port (default 4420)\n"
               "  --subnqn NQN    subsystem NQN\n"
               "  --help          this text\n");
}

bool parse_number(const char* text, uint64_t max, uint64_t* value) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || parsed > max) return false;
  *value = parsed;
  return true;
}

// 0: options parsed; otherwise the exit status (0 after --help).
int parse_options(int argc, char** argv, Options* options, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "verify_4k: %s needs a value (or unknown option)\n", arg.c_str());
      return 2;
    }
    const char* value = argv[++i];
    uint64_t number = 0;
    if (arg == "--traddr") {
      options->traddr = value;
    } else if (arg == "--trsvcid") {
      options->trsvcid = value;
    } else if (arg == "--subnqn") {
      options->subnqn = value;
    } else if (arg == "--nsid" && parse_number(value, UINT32_MAX, &number) && number != 0) {
      options->nsid = static_cast<uint32_t>(number);
    } else if (arg == "--lba" && parse_number(value, UINT64_MAX, &number)) {
      options->lba = number;
    } else {
      std::fprintf(stderr, "verify_4k: bad option or value: %s %s\n", arg.c_str(), value);
      return 2;
    }
  }
  if (options->traddr.empty() || options->subnqn.empty()) {
    std::fprintf(stderr, "verify_4k: --traddr and --subnqn are required\n");
    return 2;
  }
  return 0;
}

std::string describe(const nvmf::Error& error) {
  char text[160];
  return nvmf::error_describe(error, text, sizeof(text));
}

struct Completion {
  bool done = false;
  nvmf::spec::Status status;
};

void complete(void* ctx, const nvmf::spec::Status& status) {
  auto* completion = static_cast<Completion*>(ctx);
  completion->status = status;
  completion->done = true;
}

// Polls until the one outstanding command completes; the admin queue too (same thread: it
// owns the controller), so that keep-alive goes on however long the target takes.
bool wait(nvmf::host::Controller& controller, nvmf::host::IoQpair& qpair,
          const Completion& completion, const char* what) {
  while (!completion.done) {
    qpair.process_completions();
    (void)controller.process_admin_completions();
  }
  if (!completion.status.is_success()) {
    std::fprintf(stderr, "verify_4k: %s failed: %s\n", what,
                 nvmf::spec::status_name(completion.status));
    return false;
  }
  return true;
}

void fill_pattern(uint8_t* buffer, uint64_t lba) {
  for (uint32_t i = 0; i < kTransferBytes; ++i) {
    buffer[i] = static_cast<uint8_t>((i * 7u) ^ (lba & 0xffu) ^ 0x5au);
  }
}

int write_read_verify(nvmf::host::Host& host, nvmf::host::Controller& controller,
                      const Options& options) {
  nvmf::host::Namespace* ns = controller.ns(options.nsid);
  if (ns == nullptr) {
    std::fprintf(stderr, "verify_4k: namespace %u is not active\n", options.nsid);
    return 1;
  }
  if (ns->block_size() > kTransferBytes || kTransferBytes % ns->block_size() != 0) {
    std::fprintf(stderr, "verify_4k: block size %u does not divide 4096\n", ns->block_size());
    return 1;
  }
  const uint32_t blocks = kTransferBytes / ns->block_size();
  std::string message;
  auto qpair = controller.alloc_io_qpair({}, &message);
  if (!qpair) {
    std::fprintf(stderr, "verify_4k: I/O queue: %s\n",
                 message.empty() ? describe(qpair.error()).c_str() : message.c_str());
    return 1;
  }
  auto* written = static_cast<uint8_t*>(host.dma_alloc(kTransferBytes));
  auto* read_back = static_cast<uint8_t*>(host.dma_alloc(kTransferBytes));
  int status = 1;
  if (written != nullptr && read_back != nullptr) {
    fill_pattern(written, options.lba);
    std::memset(read_back, 0, kTransferBytes);
    Completion write_done;
    Completion read_done;
    auto submitted = ns->write(**qpair, written, options.lba, blocks, complete, &write_done);
    if (!submitted) {
      std::fprintf(stderr, "verify_4k: write: %s\n", describe(submitted.error()).c_str());
    } else if (wait(controller, **qpair, write_done, "write")) {
      submitted = ns->read(**qpair, read_back, options.lba, blocks, complete, &read_done);
      if (!submitted) {
        std::fprintf(stderr, "verify_4k: read: %s\n", describe(submitted.error()).c_str());
      } else if (wait(controller, **qpair, read_done, "read")) {
        if (std::memcmp(written, read_back, kTransferBytes) == 0) {
          std::printf("verify_4k: verified 4096 bytes at LBA %llu of namespace %u\n",
                      static_cast<unsigned long long>(options.lba), options.nsid);
          status = 0;
        } else {
          std::fprintf(stderr, "verify_4k: data read back differs from data written\n");
        }
      }
    }
  } else {
    std::fprintf(stderr, "verify_4k: out of DMA memory\n");
  }
  host.dma_free(written);
  host.dma_free(read_back);
  return status;
}

int run(const Options& options) {
  std::string message;
  const std::string trid_text = "trtype:RDMA adrfam:IPv4 traddr:" + options.traddr +
                                " trsvcid:" + options.trsvcid + " subnqn:" + options.subnqn;
  auto trid = nvmf::host::TransportId::parse(trid_text, &message);
  if (!trid) {
    std::fprintf(stderr, "verify_4k: %s\n", message.c_str());
    return 2;
  }
  auto host = nvmf::host::Host::create(nvmf::host::HostOpts{});  // rdma-core
  if (!host) {
    std::fprintf(stderr, "verify_4k: host: %s\n", describe(host.error()).c_str());
    return 1;
  }
  auto controller = (*host)->connect(*trid, {}, &message);
  if (!controller) {
    std::fprintf(stderr, "verify_4k: connect %s: %s\n", trid->to_string().c_str(),
                 message.empty() ? describe(controller.error()).c_str() : message.c_str());
    return 1;
  }
  const int status = write_read_verify(**host, **controller, options);
  auto disconnected = (*controller)->disconnect();
  if (!disconnected) {
    std::fprintf(stderr, "verify_4k: disconnect: %s\n", describe(disconnected.error()).c_str());
    return 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  bool help = false;
  const int parsed = parse_options(argc, argv, &options, &help);
  if (help) {
    print_usage(stdout);
    return 0;
  }
  if (parsed != 0) {
    print_usage(stderr);
    return parsed;
  }
  return run(options);
}
