// Fuzz target: the JSON target configuration (target::parse_target_config, nvmf_tgt -c) and,
// for a configuration that parses, target_config_to_json and build_target.
//
// Input: the configuration text.
// Properties: a failure says why in one non-empty message; a configuration that parses
// makes a Target (its options passed validation), writes itself out as JSON that parses back
// into a configuration that writes out the same text (save_config's round trip), and builds
// (bdevs, subsystems, namespaces, listeners) or fails with a message. Not built: uring bdevs
// (they open and may create files) and configurations with more than 1 MiB of malloc bdevs
// (memory is faulted in at creation); nvme bdevs have no controller pool and are refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bdev/registry.h"
#include "fuzz_input.h"
#include "target/config.h"
#include "target/target.h"

namespace target = nvmf::target;

namespace {

constexpr uint64_t kMallocBytesMax = 1 << 20;

bool buildable(const target::TargetConfig& config) {
  uint64_t malloc_bytes = 0;
  for (const target::BdevConfig& bdev : config.bdevs) {
    if (bdev.kind == target::BdevKind::uring) return false;
    if (bdev.kind == target::BdevKind::malloc) {
      const auto& opts = bdev.malloc_opts;
      if (opts.block_count > kMallocBytesMax / opts.block_size_bytes) return false;
      malloc_bytes += opts.block_count * opts.block_size_bytes;
      if (malloc_bytes > kMallocBytesMax) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string message;
  auto parsed = target::parse_target_config(text, &message);
  if (!parsed) {
    FUZZ_CHECK_MSG(!message.empty(), "a refused configuration without a message");
    return 0;
  }
  const target::TargetConfig& config = *parsed;

  const std::string written = target::target_config_to_json(config);
  std::string reread_message;
  auto reread = target::parse_target_config(written, &reread_message);
  FUZZ_CHECK_MSG(reread.has_value(), reread_message.c_str());
  FUZZ_CHECK_MSG(target::target_config_to_json(*reread) == written,
                 "save_config's output does not read back as the same configuration");

  auto made = target::Target::create(config.opts);
  FUZZ_CHECK_MSG(made.has_value(), "parsed options that Target::create refuses");
  if (!buildable(config)) return 0;
  {
    nvmf::bdev::BdevRegistry registry;
    {
      std::unique_ptr<target::Target> tgt = std::move(*made);
      std::string build_message;
      auto built = target::build_target(config, registry, *tgt, &build_message, nullptr);
      if (!built) FUZZ_CHECK_MSG(!build_message.empty(), "a failed build without a message");
    }  // the target goes first: bdevs outlive it
  }
  return 0;
}
