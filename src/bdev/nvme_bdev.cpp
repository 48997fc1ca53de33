#include "bdev/nvme_bdev.h"

#include <cerrno>
#include <cinttypes>

#include "bdev/bdev_internal.h"
#include "spec/nvme.h"

namespace nvmf::bdev {
namespace {
class NvmeBdev;
}  // namespace

struct NvmeControllerPool::Entry {
  std::unique_ptr<nvme_pcie::Controller> controller;
  std::mutex bdevs_mutex;  // the recovery thread walks the list on removal
  std::vector<NvmeBdev*> bdevs;
};

namespace {

// One I/O queue pair of the controller. The driver completes requests from poll(); requests
// the driver refuses because the controller is gone complete here, at the next poll, as
// io_error (ENODEV), so a removed device fails I/O quietly instead of refusing submits.
class NvmeChannel final : public IoChannel {
 public:
  NvmeChannel(NvmeBdev& bdev, std::unique_ptr<nvme_pcie::IoQueue> queue) noexcept;
  ~NvmeChannel() override;

  uint64_t bytes_copied() const noexcept { return queue_->stats().bytes_copied.load(std::memory_order_relaxed); }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override;
  unsigned poll_completions(unsigned budget) noexcept override;
  static void on_done(void* ctx, const spec::Status& status);

  NvmeBdev& bdev_;
  std::unique_ptr<nvme_pcie::IoQueue> queue_;
  detail::IoQueue failed_;  // refused by a gone controller: complete at the next poll
  uint64_t now_ns_ = 0;     // read once per poll for completions
  bool closing_ = false;    // in the destructor: what is left completes as aborted
};

class NvmeBdev final : public Bdev {
 public:
  NvmeBdev(Params params, NvmeControllerPool::Entry& entry, uint32_t nsid) noexcept
      : Bdev(std::move(params)), entry_(entry), nsid_(nsid) {}
  ~NvmeBdev() override;

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  nvme_pcie::Controller& controller() const noexcept { return *entry_.controller; }
  uint32_t nsid() const noexcept { return nsid_; }
  void removed() noexcept { notify_removed(); }
  // Bytes copied by channels already destroyed plus live ones (setup-path lock).
  uint64_t bytes_copied() const noexcept;
  void channel_opened(NvmeChannel* channel) noexcept;
  // Takes the channel off the live list and adds what it copied, in one step.
  void channel_closed(NvmeChannel* channel, uint64_t bytes) noexcept;

 private:
  NvmeControllerPool::Entry& entry_;
  uint32_t nsid_;
  mutable std::mutex copies_mutex_;
  uint64_t copies_closed_ = 0;
  std::vector<NvmeChannel*> live_channels_;
};

NvmeChannel::NvmeChannel(NvmeBdev& bdev, std::unique_ptr<nvme_pcie::IoQueue> queue) noexcept
    : IoChannel(bdev), bdev_(bdev), queue_(std::move(queue)) {
  bdev_.channel_opened(this);
}

NvmeChannel::~NvmeChannel() {
  owner().check();
  const uint64_t now_ns = clock().now_ns();
  closing_ = true;
  while (BdevIo* io = failed_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns);
  bdev_.channel_closed(this, bytes_copied());
  now_ns_ = now_ns;
  queue_.reset();  // deletes the device queues, then completes what is left as "aborted"
}

Result<void> NvmeChannel::queue_io(BdevIo& io) noexcept {
  nvme_pcie::IoCommand command;
  command.nsid = bdev_.nsid();
  command.lba = io.offset_blocks;
  command.block_count = io.num_blocks;
  switch (io.type) {
    case IoType::read:
      command.opcode = spec::nvm_opcode::read;
      break;
    case IoType::write:
      command.opcode = spec::nvm_opcode::write;
      break;
    case IoType::flush:
      command.opcode = spec::nvm_opcode::flush;
      break;
    case IoType::write_zeroes:
      command.opcode = spec::nvm_opcode::write_zeroes;
      break;
    case IoType::unmap:
      command.opcode = spec::nvm_opcode::dataset_management;
      break;
  }
  command.iov = io.iov;
  command.iovcnt = io.iovcnt;
  io.backend_word[0] = reinterpret_cast<uintptr_t>(this);  // on_done finds its channel
  auto submitted = queue_->submit(command, on_done, &io);
  if (submitted) return {};
  if (submitted.error().code == Errc::disconnected) {
    failed_.push_back(io);
    return {};
  }
  return submitted;
}

// `aborted` is what bdev.h reserves for a channel that is being destroyed; every other
// failure is io_error with the reason in errno: ENODEV (device removed), ETIMEDOUT (aborted
// by the driver after its command timeout), EIO (the device's status, or a command that failed
// its one retry after a controller reset).
void NvmeChannel::on_done(void* ctx, const spec::Status& status) {
  auto& io = *static_cast<BdevIo*>(ctx);
  auto& channel = *reinterpret_cast<NvmeChannel*>(io.backend_word[0]);
  if (status.is_success()) {
    channel.complete(io, IoStatus::success, 0, channel.now_ns_);
    return;
  }
  if (channel.closing_) {
    channel.complete(io, IoStatus::aborted, 0, channel.now_ns_);
    return;
  }
  int os_errno = EIO;
  if (channel.bdev_.controller().state() == nvme_pcie::ControllerState::removed) {
    os_errno = ENODEV;
  } else if (status.sct == spec::sct::generic && status.sc == spec::sc_generic::abort_requested) {
    os_errno = ETIMEDOUT;
  }
  channel.complete(io, IoStatus::io_error, os_errno, channel.now_ns_);
}

unsigned NvmeChannel::poll_completions(unsigned budget) noexcept {
  now_ns_ = clock().now_ns();
  unsigned delivered = 0;
  while (delivered < budget && !failed_.empty()) {
    complete(*failed_.pop_front(), IoStatus::io_error, ENODEV, now_ns_);
    ++delivered;
  }
  return delivered + queue_->poll(budget - delivered);
}

NvmeBdev::~NvmeBdev() {
  std::lock_guard<std::mutex> lock(entry_.bdevs_mutex);
  std::erase(entry_.bdevs, this);
}

Result<std::unique_ptr<IoChannel>> NvmeBdev::create_channel() noexcept {
  auto queue = controller().create_io_queue();
  if (!queue) {
    NVMF_ERRLOG(bdev, "nvme bdev '%s': no I/O queue on %s: %s", name().c_str(),
                controller().address().c_str(), queue.error().detail);
    return Unexpected(queue.error());
  }
  try {
    return std::unique_ptr<IoChannel>(std::make_unique<NvmeChannel>(*this, std::move(*queue)));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "nvme channel");
  }
}

uint64_t NvmeBdev::bytes_copied() const noexcept {
  std::lock_guard<std::mutex> lock(copies_mutex_);
  uint64_t total = copies_closed_;
  for (const NvmeChannel* channel : live_channels_) total += channel->bytes_copied();
  return total;
}

void NvmeBdev::channel_closed(NvmeChannel* channel, uint64_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(copies_mutex_);
  std::erase(live_channels_, channel);
  copies_closed_ += bytes;
}

void NvmeBdev::channel_opened(NvmeChannel* channel) noexcept {
  std::lock_guard<std::mutex> lock(copies_mutex_);
  live_channels_.push_back(channel);  // setup-path
}


// Read, write and flush always; Write Zeroes when ONCS says so; deallocate only when ONCS has
// Dataset Management and DLFEAT promises deallocated blocks read back as zeroes (bdev.h's
// contract for unmap, which the target advertises as DLFEAT to hosts).
IoTypeMask supported_io_types(const nvme_pcie::Controller& controller,
                              const nvme_pcie::NamespaceInfo& ns) noexcept {
  IoTypeMask types = io_type_bit(IoType::read) | io_type_bit(IoType::write) |
                     io_type_bit(IoType::flush);
  const uint16_t oncs = controller.identify().oncs;
  if (oncs & spec::oncs_bit::write_zeroes) types |= io_type_bit(IoType::write_zeroes);
  if ((oncs & spec::oncs_bit::dataset_management) && (ns.dlfeat & 0x7) == 0x1) {
    types |= io_type_bit(IoType::unmap);
  }
  return types;
}

}  // namespace

std::string opts_to_json(const NvmeBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("type", "nvme");
  json.add_string("name", opts.name);
  json.add_string("pci", opts.pci);
  json.add_number("nsid", opts.nsid);
  json.add_number("queue_depth", opts.queue_depth_max);
  return json.finish();
}

NvmeControllerPool::NvmeControllerPool(DeviceOpener opener, const nvme_pcie::ControllerOpts& opts)
    : opener_(std::move(opener)), opts_(opts) {}

NvmeControllerPool::~NvmeControllerPool() = default;

Result<NvmeControllerPool::Entry*> NvmeControllerPool::attach(const std::string& pci) {
  if (auto found = controllers_.find(pci); found != controllers_.end()) return found->second.get();
  if (!opener_) return Unexpected(Errc::not_supported, "no PCIe device opener registered");
  auto device = opener_(pci);
  if (!device) return Unexpected(device.error());
  auto controller = nvme_pcie::Controller::create(std::move(*device), opts_);
  if (!controller) return Unexpected(controller.error());
  auto entry = std::make_unique<Entry>();  // setup-path
  entry->controller = std::move(*controller);
  // Removal reaches every bdev on the controller's namespaces.
  entry->controller->set_removed_callback(
      [](void* ctx, nvme_pcie::Controller&) {
        auto& removed = *static_cast<Entry*>(ctx);
        std::lock_guard<std::mutex> lock(removed.bdevs_mutex);
        for (NvmeBdev* bdev : removed.bdevs) bdev->removed();
      },
      entry.get());
  Entry* raw = entry.get();
  controllers_.emplace(pci, std::move(entry));
  return raw;
}

Result<std::unique_ptr<Bdev>> create_nvme_bdev(const NvmeBdevOpts& opts,
                                               NvmeControllerPool& pool) noexcept {
  constexpr const char* kBackend = "nvme";
  if (opts.pci.empty()) return Unexpected(Errc::invalid_argument, "pci");
  if (opts.nsid == 0 || opts.nsid == spec::nsid_all) return Unexpected(Errc::invalid_argument, "nsid");
  // The block size comes from the device: validate the rest with a placeholder.
  if (auto valid = detail::validate_common_opts({kBackend, opts.name, 512, opts.queue_depth_max, opts.clock});
      !valid) {
    return Unexpected(valid.error());
  }
  try {
    auto entry = pool.attach(opts.pci);
    if (!entry) {
      NVMF_ERRLOG(bdev, "nvme bdev '%s': cannot attach %s: %s", opts.name.c_str(),
                  opts.pci.c_str(), entry.error().detail);
      return Unexpected(entry.error());
    }
    nvme_pcie::Controller& controller = *(*entry)->controller;
    const nvme_pcie::NamespaceInfo* ns = controller.find_namespace(opts.nsid);
    if (ns == nullptr) {
      NVMF_ERRLOG(bdev, "nvme bdev '%s': %s has no active namespace %" PRIu32, opts.name.c_str(),
                  opts.pci.c_str(), opts.nsid);
      return Unexpected(Errc::not_found, "nsid: no such active namespace");
    }
    Bdev::Params params{.backend_name = kBackend,
                        .name = opts.name,
                        .block_size_bytes = ns->block_size_bytes,
                        .block_count = ns->block_count,
                        .uuid = ns->uuid,
                        .io_types = supported_io_types(controller, *ns),
                        .queue_depth_max = std::min(opts.queue_depth_max,
                                                    controller.io_queue_entries() - 1),
                        .buffer_alignment_bytes = 4,  // PRP entries are dword-aligned
                        .clock = opts.clock,
                        .nguid = ns->nguid,
                        .eui64 = ns->eui64};
    auto bdev = std::make_unique<NvmeBdev>(std::move(params), **entry, opts.nsid);
    {
      std::lock_guard<std::mutex> lock((*entry)->bdevs_mutex);
      (*entry)->bdevs.push_back(bdev.get());  // setup-path
    }
    NVMF_INFOLOG(bdev, "nvme bdev '%s': %s namespace %" PRIu32 ", %" PRIu64 " blocks of %" PRIu32
                       " bytes",
                 opts.name.c_str(), opts.pci.c_str(), opts.nsid, ns->block_count,
                 ns->block_size_bytes);
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "nvme bdev");
  }
}

uint64_t nvme_bdev_bytes_copied(const Bdev& bdev) noexcept {
  if (std::string_view(bdev.backend_name()) != "nvme") return 0;
  return static_cast<const NvmeBdev&>(bdev).bytes_copied();
}

}  // namespace nvmf::bdev
