#include "daemon.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <thread>
#include <utility>

#include "common/log.h"
#include "namespace_backend.h"
#include "nbd/queue.h"
#include "reactor/group.h"

NVMF_LOG_COMPONENT(hostd);

namespace nvmf::hostd {

const char* controller_state_name(ControllerState state) noexcept {
  switch (state) {
    case ControllerState::live:
      return "live";
    case ControllerState::reconnecting:
      return "reconnecting";
    case ControllerState::lost:
      return "lost";
    case ControllerState::deleting:
      return "deleting";
  }
  return "?";
}

namespace {

// How long a disconnect waits for the kernel to take its last replies before the I/O queue
// pairs go (which fails what is still in flight).
constexpr auto kDrainTimeout = std::chrono::seconds(10);

void yield_idle(void*) { std::this_thread::yield(); }

// One socket of one exported namespace, on the reactor that owns it.
struct Binding {
  std::unique_ptr<NamespaceBackend> backend;
  std::unique_ptr<nbd::Queue> queue;
  reactor::Poller poller;

  Binding() : poller("nbd-queue", &Binding::poll, this) {}
  // Completions have no fd to wake the reactor: while I/O is in flight or replies wait for
  // room in the socket, report work so an adaptive or interrupt reactor keeps polling. A
  // round that found nothing yields the CPU first: the RDMA device's completion work (rxe's
  // kernel threads), the kernel's NBD threads and the application share these cores, and a
  // spinning reactor would only delay the completion it waits for.
  static int poll(void* ctx, unsigned) {
    auto& binding = *static_cast<Binding*>(ctx);
    const int work = binding.queue->poll();
    if (work != 0) return work;
    if (binding.queue->in_flight() == 0 && !binding.queue->wants_write()) return 0;
    std::this_thread::yield();
    return 1;
  }
};

struct Export {
  uint32_t nsid = 0;
  DeviceGeometry geometry;
  ExportedDevice device;
  std::vector<std::unique_ptr<Binding>> bindings;  // [reactor]
};

struct Entry {
  std::string name;  // "nvmf0"
  ConnectRequest request;
  std::unique_ptr<host::Controller> controller;
  std::vector<std::unique_ptr<host::IoQpair>> qpairs;  // [reactor], owned by that reactor
  std::vector<std::unique_ptr<Export>> exports;
  ControllerState state = ControllerState::live;
  // Controller-level reconnect (reconnecting): when the loss began, the next attempt, its
  // number.
  std::chrono::steady_clock::time_point lost_at{};
  std::chrono::steady_clock::time_point next_attempt{};
  unsigned attempt = 0;
};

std::string strip_dev(const std::string& device) {
  return device.rfind("/dev/", 0) == 0 ? device.substr(5) : device;
}

}  // namespace

struct Daemon::Impl {
  DaemonOpts opts;
  DeviceExporter& exporter;
  std::unique_ptr<host::Host> host;
  std::unique_ptr<reactor::ReactorGroup> admin_group;  // one reactor: the controllers' thread
  std::unique_ptr<reactor::ReactorGroup> io_group;
  reactor::Timer admin_timer{"hostd-admin", &Impl::admin_tick, this};
  std::vector<std::unique_ptr<Entry>> entries;  // admin reactor only

  Impl(const DaemonOpts& o, DeviceExporter& e) : opts(o), exporter(e) {}

  reactor::Reactor& admin() { return admin_group->reactor(0); }
  reactor::Reactor& io(size_t index) { return io_group->reactor(index); }

  static void admin_tick(void* ctx) {
    auto& impl = *static_cast<Impl*>(ctx);
    for (auto& entry : impl.entries) {
      if (entry->state == ControllerState::live) {
        entry->controller->process_admin_completions();
        if (!entry->controller->connected()) impl.begin_reconnect(*entry);
      } else if (entry->state == ControllerState::reconnecting &&
                 std::chrono::steady_clock::now() >= entry->next_attempt) {
        impl.try_reconnect(*entry);
      }
    }
  }

  // --- admin reactor ---
  Result<Json> connect(ConnectRequest request, std::string* message);
  Result<void> make_qpairs(Entry& entry, size_t count, std::string* message);
  Result<void> export_namespace(Entry& entry, uint32_t nsid, std::string* message);
  void remove(Entry& entry);
  void begin_reconnect(Entry& entry);
  void try_reconnect(Entry& entry);
  bool swap_controller(Entry& entry, std::unique_ptr<host::Controller> fresh, std::string* message);
  void give_up(Entry& entry);
  void log_next_attempt(const Entry& entry, const std::string& why) const;
  template <typename Fn>
  void for_each_backend(Entry& entry, size_t reactor_index, Fn fn);
  void drain_bindings(Entry& entry);
  void free_bindings_and_qpairs(Entry& entry);
  Json describe(const Entry& entry) const;
  std::string free_name() const;
  Entry* find_duplicate(const ConnectRequest& request);
};

// ---------------------------------------------------------------------------------------
// Connect

std::string Daemon::Impl::free_name() const {
  for (unsigned index = 0;; ++index) {
    const std::string name = "nvmf" + std::to_string(index);
    const bool used = std::any_of(entries.begin(), entries.end(),
                                  [&](const auto& entry) { return entry->name == name; });
    if (!used) return name;
  }
}

Entry* Daemon::Impl::find_duplicate(const ConnectRequest& request) {
  for (auto& entry : entries) {
    const host::TransportId& trid = entry->request.trid;
    if (trid.subnqn == request.trid.subnqn && trid.traddr == request.trid.traddr &&
        trid.trsvcid == request.trid.trsvcid &&
        entry->request.opts.hostnqn == request.opts.hostnqn) {
      return entry.get();
    }
  }
  return nullptr;
}

Result<void> Daemon::Impl::make_qpairs(Entry& entry, size_t count, std::string* message) {
  entry.qpairs.resize(count);
  for (size_t r = 0; r < count; ++r) {
    std::string why;
    reactor::run_and_wait(io(r), [&] {
      auto qpair = entry.controller->alloc_io_qpair({}, &why);
      if (qpair) entry.qpairs[r] = std::move(*qpair);
    });
    if (entry.qpairs[r] == nullptr) {
      *message = "I/O queue " + std::to_string(r + 1) + ": " + why;
      return Unexpected(Errc::io_error, "alloc_io_qpair");
    }
  }
  return {};
}

Result<void> Daemon::Impl::export_namespace(Entry& entry, uint32_t nsid, std::string* message) {
  host::Namespace* ns = entry.controller->ns(nsid);
  auto exported = std::make_unique<Export>();
  exported->nsid = nsid;
  exported->geometry.size_bytes = ns->capacity_bytes();
  exported->geometry.block_size_bytes = ns->block_size();
  exported->geometry.max_request_bytes = opts.max_request_bytes;
  exported->geometry.identifier = entry.request.trid.subnqn + "/nsid " + std::to_string(nsid);
  const uint32_t mdts = entry.controller->data().max_transfer_bytes;

  std::vector<int> kernel_fds;
  for (size_t r = 0; r < entry.qpairs.size(); ++r) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      *message = std::string("socketpair: ") + std::strerror(errno);
      for (int fd : kernel_fds) close(fd);
      return Unexpected(make_system_error(errno, "socketpair"));
    }
    kernel_fds.push_back(fds[0]);
    auto binding = std::make_unique<Binding>();
    nbd::QueueOpts queue_opts;
    queue_opts.slots = opts.slots_per_queue;
    queue_opts.max_request_bytes = opts.max_request_bytes;
    queue_opts.size_bytes = exported->geometry.size_bytes;
    queue_opts.block_size_bytes = exported->geometry.block_size_bytes;
    queue_opts.alloc = [](void* ctx, size_t bytes) {
      return static_cast<host::Host*>(ctx)->dma_alloc(bytes);
    };
    queue_opts.free = [](void* ctx, void* buffer) {
      static_cast<host::Host*>(ctx)->dma_free(buffer);
    };
    queue_opts.alloc_ctx = host.get();
    queue_opts.name = entry.name + " ns" + std::to_string(nsid) + " q" + std::to_string(r);
    std::string why;
    reactor::run_and_wait(io(r), [&] {
      binding->backend =
          std::make_unique<NamespaceBackend>(*ns, *entry.qpairs[r], queue_opts.slots, mdts);
      auto queue = nbd::Queue::create(fds[1], *binding->backend, queue_opts);
      if (!queue) {
        char text[160];
        why = error_describe(queue.error(), text, sizeof(text));
        return;
      }
      binding->queue = std::move(*queue);
      binding->backend->set_queue(*binding->queue);
      if (!io(r).add_poller(binding->poller, binding->queue->fd())) {
        why = "cannot register the NBD queue's poller";
        binding->queue.reset();
      }
    });
    if (binding->queue == nullptr) {
      *message = "namespace " + std::to_string(nsid) + ": NBD queue: " + why;
      for (int fd : kernel_fds) close(fd);
      entry.exports.push_back(std::move(exported));  // the bindings made so far go with it
      return Unexpected(Errc::io_error, "nbd queue");
    }
    exported->bindings.push_back(std::move(binding));
  }
  auto device = exporter.attach(exported->geometry, std::move(kernel_fds), message);
  entry.exports.push_back(std::move(exported));
  if (!device) return Unexpected(device.error());
  entry.exports.back()->device = *device;
  NVMF_NOTICELOG(hostd, "%s: %s namespace %u is %s (%" PRIu64 " bytes, %u-byte blocks, %zu queues)",
                 entry.name.c_str(), entry.request.trid.subnqn.c_str(), nsid, device->path.c_str(),
                 entry.exports.back()->geometry.size_bytes,
                 entry.exports.back()->geometry.block_size_bytes, entry.qpairs.size());
  return {};
}

Result<Json> Daemon::Impl::connect(ConnectRequest request, std::string* message) {
  if (request.opts.hostnqn.empty() || request.opts.hostid == std::array<uint8_t, 16>{}) {
    const host::HostIdentity identity = host::default_host_identity();
    if (request.opts.hostnqn.empty()) request.opts.hostnqn = identity.hostnqn;
    if (request.opts.hostid == std::array<uint8_t, 16>{}) request.opts.hostid = identity.hostid;
  }
  if (Entry* existing = find_duplicate(request)) {
    *message = "already connected to " + request.trid.subnqn + " at " + request.trid.traddr + ":" +
               request.trid.trsvcid + " (" + existing->name + ")";
    return Unexpected(Errc::already_exists, "connected");
  }
  // The daemon reconnects a lost controller itself (begin_reconnect: new qpairs, the block
  // devices re-exported), so the library's controller reset stays off.
  request.opts.controller_recovery = false;
  const size_t reactors = io_group->size();
  const size_t wanted = request.nr_io_queues == 0 ? reactors : request.nr_io_queues;
  request.opts.io_queue_count = static_cast<uint16_t>(std::min(wanted, reactors));

  auto entry = std::make_unique<Entry>();
  entry->name = free_name();
  entry->request = request;
  auto controller = host->connect(request.trid, request.opts, message);
  if (!controller) return Unexpected(controller.error());
  entry->controller = std::move(*controller);
  const size_t queues =
      std::min<size_t>(request.opts.io_queue_count, entry->controller->data().io_queues_granted);
  Result<void> made = queues == 0 ? Result<void>(Unexpected(Errc::io_error, "no I/O queues"))
                                  : make_qpairs(*entry, queues, message);
  if (queues == 0) *message = "the controller granted no I/O queues";
  for (uint32_t nsid : entry->controller->active_namespaces()) {
    if (!made) break;
    made = export_namespace(*entry, nsid, message);
  }
  if (!made) {
    remove(*entry);
    return Unexpected(made.error());
  }
  NVMF_NOTICELOG(hostd, "%s: connected to %s at %s:%s (controller %u, %zu I/O queues, memreg %s)",
                 entry->name.c_str(), request.trid.subnqn.c_str(), request.trid.traddr.c_str(),
                 request.trid.trsvcid.c_str(), entry->controller->data().cntlid, queues,
                 host::memreg_policy_name(request.opts.memreg));
  Json answer = describe(*entry);
  entries.push_back(std::move(entry));
  return answer;
}

// ---------------------------------------------------------------------------------------
// Disconnect: the block devices first (their page cache written back), then the queues,
// then the controller.

void Daemon::Impl::drain_bindings(Entry& entry) {
  const auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
  for (;;) {
    uint32_t in_flight = 0;
    for (size_t r = 0; r < entry.qpairs.size(); ++r) {
      reactor::run_and_wait(io(r), [&] {
        for (auto& exported : entry.exports) {
          if (r >= exported->bindings.size() || !exported->bindings[r]->queue) continue;
          nbd::Queue& queue = *exported->bindings[r]->queue;
          queue.drain();
          in_flight += queue.in_flight();
        }
      });
    }
    if (in_flight == 0) return;
    if (std::chrono::steady_clock::now() > deadline) {
      NVMF_WARNLOG(hostd, "%s: %u requests still in flight after %lld s: they fail",
                   entry.name.c_str(), in_flight,
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::seconds>(kDrainTimeout).count()));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Daemon::Impl::free_bindings_and_qpairs(Entry& entry) {
  for (size_t r = 0; r < entry.qpairs.size(); ++r) {
    reactor::run_and_wait(io(r), [&] {
      // The queue pair goes first: what it still holds completes (aborted) into the queues.
      for_each_backend(entry, r, [](NamespaceBackend& backend, Export&) { backend.fail_all(); });
      if (entry.qpairs[r]) entry.qpairs[r]->disconnect();
      for (auto& exported : entry.exports) {
        if (r >= exported->bindings.size()) continue;
        Binding& binding = *exported->bindings[r];
        if (binding.poller.registered()) io(r).remove_poller(binding.poller);
        binding.queue.reset();
        binding.backend.reset();
      }
      entry.qpairs[r].reset();
    });
  }
  entry.exports.clear();
}

void Daemon::Impl::remove(Entry& entry) {
  if (entry.state == ControllerState::reconnecting) give_up(entry);  // nothing held survives
  entry.state = ControllerState::deleting;
  std::string message;
  for (auto& exported : entry.exports) {
    if (exported->device.index < 0) continue;
    if (!exporter.flush(exported->device, &message)) {
      NVMF_WARNLOG(hostd, "%s: flushing %s: %s", entry.name.c_str(), exported->device.path.c_str(),
                   message.c_str());
    }
    if (!exporter.detach(exported->device, &message)) {
      NVMF_WARNLOG(hostd, "%s: removing %s: %s", entry.name.c_str(), exported->device.path.c_str(),
                   message.c_str());
    }
  }
  drain_bindings(entry);
  free_bindings_and_qpairs(entry);
  if (entry.controller) {
    auto done = entry.controller->disconnect();
    if (!done) {
      char text[160];
      NVMF_WARNLOG(hostd, "%s: controller disconnect: %s", entry.name.c_str(),
                   error_describe(done.error(), text, sizeof(text)));
    }
  }
  NVMF_NOTICELOG(hostd, "%s: disconnected from %s", entry.name.c_str(),
                 entry.request.trid.subnqn.c_str());
}

// ---------------------------------------------------------------------------------------
// Controller loss: hold, reconnect every reconnect_delay, swap the queue pairs, or give up.

template <typename Fn>
void Daemon::Impl::for_each_backend(Entry& entry, size_t reactor_index, Fn fn) {
  for (auto& exported : entry.exports) {
    if (reactor_index >= exported->bindings.size()) continue;
    Binding& binding = *exported->bindings[reactor_index];
    if (binding.backend) fn(*binding.backend, *exported);
  }
}

namespace {

double seconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

void Daemon::Impl::log_next_attempt(const Entry& entry, const std::string& why) const {
  const auto delay = std::chrono::milliseconds(entry.request.opts.reconnect_delay_ms);
  std::string attempts = "unlimited";
  std::string left = "never lost";
  if (!entry.request.ctrl_loss_forever) {
    const auto loss = std::chrono::milliseconds(entry.request.opts.ctrl_loss_timeout_ms);
    attempts = std::to_string(std::max<int64_t>(1, loss / delay));
    char text[64];
    std::snprintf(text, sizeof(text), "%.0f s before the controller is lost",
                  std::max(0.0, seconds(entry.lost_at + loss - std::chrono::steady_clock::now())));
    left = text;
  }
  NVMF_NOTICELOG(hostd, "%s: %s: %s; reconnecting in %.3g s, attempt %u of %s, %s",
                 entry.name.c_str(), entry.request.trid.subnqn.c_str(), why.c_str(), seconds(delay),
                 entry.attempt, attempts.c_str(), left.c_str());
}

void Daemon::Impl::begin_reconnect(Entry& entry) {
  entry.state = ControllerState::reconnecting;
  entry.lost_at = std::chrono::steady_clock::now();
  entry.attempt = 1;
  entry.next_attempt =
      entry.lost_at + std::chrono::milliseconds(entry.request.opts.reconnect_delay_ms);
  for (size_t r = 0; r < entry.qpairs.size(); ++r) {
    reactor::run_and_wait(io(r), [&] {
      for_each_backend(entry, r, [](NamespaceBackend& backend, Export&) { backend.hold(); });
    });
  }
  log_next_attempt(entry, "controller " + std::to_string(entry.controller->data().cntlid) +
                              " lost its admin queue (requests in flight are held)");
}

bool Daemon::Impl::swap_controller(Entry& entry, std::unique_ptr<host::Controller> fresh,
                                   std::string* message) {
  for (const auto& exported : entry.exports) {
    const host::Namespace* ns = fresh->ns(exported->nsid);
    if (ns == nullptr || ns->block_size() != exported->geometry.block_size_bytes ||
        ns->capacity_bytes() != exported->geometry.size_bytes) {
      *message = "namespace " + std::to_string(exported->nsid) + " is gone or changed size";
      return false;
    }
  }
  // Every new queue pair first, each on its reactor, so a failure leaves the old ones alone.
  std::vector<std::unique_ptr<host::IoQpair>> qpairs(entry.qpairs.size());
  for (size_t r = 0; r < qpairs.size(); ++r) {
    reactor::run_and_wait(io(r), [&] {
      auto qpair = fresh->alloc_io_qpair({}, message);
      if (qpair) qpairs[r] = std::move(*qpair);
    });
    if (qpairs[r] == nullptr) {
      for (size_t k = 0; k < r; ++k) reactor::run_and_wait(io(k), [&] { qpairs[k].reset(); });
      return false;
    }
  }
  for (size_t r = 0; r < qpairs.size(); ++r) {
    reactor::run_and_wait(io(r), [&] {
      entry.qpairs[r]->disconnect();  // what it held comes back aborted: queued for a redo
      for_each_backend(entry, r, [&](NamespaceBackend& backend, Export& exported) {
        backend.rebind(*fresh->ns(exported.nsid), *qpairs[r]);
      });
      entry.qpairs[r] = std::move(qpairs[r]);
    });
  }
  std::unique_ptr<host::Controller> old = std::move(entry.controller);
  entry.controller = std::move(fresh);
  (void)old->disconnect();  // its admin queue is gone already
  return true;
}

void Daemon::Impl::try_reconnect(Entry& entry) {
  std::string message;
  auto fresh = host->connect(entry.request.trid, entry.request.opts, &message);
  if (fresh && swap_controller(entry, std::move(*fresh), &message)) {
    entry.state = ControllerState::live;
    NVMF_NOTICELOG(
        hostd, "%s: %s: Successfully reconnected (controller %u, attempt %u, after %.1f s)",
        entry.name.c_str(), entry.request.trid.subnqn.c_str(), entry.controller->data().cntlid,
        entry.attempt, seconds(std::chrono::steady_clock::now() - entry.lost_at));
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const auto delay = std::chrono::milliseconds(entry.request.opts.reconnect_delay_ms);
  const auto loss = std::chrono::milliseconds(entry.request.opts.ctrl_loss_timeout_ms);
  if (!entry.request.ctrl_loss_forever && now + delay > entry.lost_at + loss) {
    NVMF_ERRLOG(hostd, "%s: %s: attempt %u failed: %s", entry.name.c_str(),
                entry.request.trid.subnqn.c_str(), entry.attempt, message.c_str());
    give_up(entry);
    return;
  }
  ++entry.attempt;
  entry.next_attempt = now + delay;
  log_next_attempt(entry, "attempt " + std::to_string(entry.attempt - 1) + " failed: " + message);
}

void Daemon::Impl::give_up(Entry& entry) {
  entry.state = ControllerState::lost;
  for (size_t r = 0; r < entry.qpairs.size(); ++r) {
    reactor::run_and_wait(io(r), [&] {
      for_each_backend(entry, r, [](NamespaceBackend& backend, Export&) { backend.fail_all(); });
      entry.qpairs[r]->disconnect();  // what it still held fails now
    });
  }
  NVMF_ERRLOG(hostd,
              "%s: %s: controller loss timeout (%u s) reached: giving up; I/O to its "
              "devices fails until 'nvmfctl disconnect'",
              entry.name.c_str(), entry.request.trid.subnqn.c_str(),
              entry.request.opts.ctrl_loss_timeout_ms / 1000);
}

// ---------------------------------------------------------------------------------------
// Descriptions

Json Daemon::Impl::describe(const Entry& entry) const {
  const host::TransportId& trid = entry.request.trid;
  const host::ControllerData& data = entry.controller->data();
  Json namespaces = Json::array();
  for (const auto& exported : entry.exports) {
    namespaces.push_back({{"nsid", exported->nsid},
                          {"device", exported->device.path},
                          {"block_size", exported->geometry.block_size_bytes},
                          {"size_bytes", exported->geometry.size_bytes}});
  }
  std::string adrfam = trid.adrfam;
  std::transform(adrfam.begin(), adrfam.end(), adrfam.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return Json{{"name", entry.name},
              {"subnqn", trid.subnqn},
              {"trtype", "rdma"},
              {"adrfam", adrfam},
              {"traddr", trid.traddr},
              {"trsvcid", trid.trsvcid},
              {"hostnqn", entry.request.opts.hostnqn},
              {"hostid", host::uuid_to_string(entry.request.opts.hostid)},
              {"cntlid", data.cntlid},
              {"state", controller_state_name(entry.state)},
              {"memreg", host::memreg_policy_name(entry.request.opts.memreg)},
              {"io_queues", entry.qpairs.size()},
              {"queue_size", data.io_queue_size},
              {"model", data.model_number},
              {"serial", data.serial_number},
              {"firmware", data.firmware_revision},
              {"namespaces", namespaces}};
}

// ---------------------------------------------------------------------------------------
// Daemon

Result<std::unique_ptr<Daemon>> Daemon::start(const DaemonOpts& opts, DeviceExporter& exporter,
                                              std::string* message) {
  if (opts.io_reactors == 0 || opts.io_reactors > 64) {
    *message = "I/O reactors must be 1..64, not " + std::to_string(opts.io_reactors);
    return Unexpected(Errc::invalid_argument, "io_reactors");
  }
  auto impl = std::make_unique<Impl>(opts, exporter);
  host::HostOpts host_opts;
  host_opts.provider = opts.provider;
  host_opts.idle = &yield_idle;
  auto host = host::Host::create(host_opts);
  if (!host) {
    char text[160];
    *message = std::string("cannot start the RDMA host: ") +
               error_describe(host.error(), text, sizeof(text));
    return Unexpected(host.error());
  }
  impl->host = std::move(*host);

  reactor::ReactorGroupOpts admin_opts;
  admin_opts.reactor.mode = reactor::Mode::interrupt;
  admin_opts.reactor.name = "hostd-admin";
  reactor::ReactorGroupOpts io_opts;
  io_opts.reactor_count = opts.io_reactors;
  io_opts.reactor.mode = opts.mode;
  io_opts.reactor.name = "hostd-io";
  auto admin_group = reactor::ReactorGroup::start(admin_opts);
  auto io_group = reactor::ReactorGroup::start(io_opts);
  if (!admin_group || !io_group) {
    *message = "cannot start the reactor threads";
    return Unexpected(Errc::system_error, "reactors");
  }
  impl->admin_group = std::move(*admin_group);
  impl->io_group = std::move(*io_group);
  Impl* raw = impl.get();
  const uint64_t period_ns = uint64_t{opts.admin_poll_ms} * 1000 * 1000;
  reactor::run_and_wait(raw->admin(),
                        [&] { raw->admin().start_timer(raw->admin_timer, period_ns, period_ns); });
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() {
  disconnect_all();
  Impl& impl = *impl_;
  reactor::run_and_wait(impl.admin(), [&] { impl.admin().cancel_timer(impl.admin_timer); });
  impl.io_group->stop();
  impl.admin_group->stop();
}

Result<Json> Daemon::connect(const ConnectRequest& request, std::string* message) {
  Result<Json> answer = Unexpected(Errc::bad_state, "not run");
  reactor::run_and_wait(impl_->admin(), [&] { answer = impl_->connect(request, message); });
  return answer;
}

Result<Json> Daemon::disconnect_nqn(const std::string& subnqn, std::string* message) {
  Result<Json> answer = Unexpected(Errc::bad_state, "not run");
  reactor::run_and_wait(impl_->admin(), [&] {
    Json gone = Json::array();
    auto& entries = impl_->entries;
    for (auto it = entries.begin(); it != entries.end();) {
      if ((*it)->request.trid.subnqn != subnqn) {
        ++it;
        continue;
      }
      gone.push_back(impl_->describe(**it));
      impl_->remove(**it);
      it = entries.erase(it);
    }
    if (gone.empty()) {
      *message = "no controller of nvmf_hostd is connected to " + subnqn;
      answer = Unexpected(Errc::not_found, "subnqn");
    } else {
      answer = Json{{"disconnected", gone}};
    }
  });
  return answer;
}

Result<Json> Daemon::disconnect_device(const std::string& device, std::string* message) {
  Result<Json> answer = Unexpected(Errc::bad_state, "not run");
  const std::string wanted = strip_dev(device);
  reactor::run_and_wait(impl_->admin(), [&] {
    auto& entries = impl_->entries;
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      const bool holds =
          std::any_of((*it)->exports.begin(), (*it)->exports.end(),
                      [&](const auto& e) { return strip_dev(e->device.path) == wanted; });
      if (!holds) continue;
      Json gone = Json::array({impl_->describe(**it)});
      impl_->remove(**it);
      entries.erase(it);
      answer = Json{{"disconnected", gone}};
      return;
    }
    *message = "/dev/" + wanted + " is not exported by nvmf_hostd";
    answer = Unexpected(Errc::not_found, "device");
  });
  return answer;
}

Json Daemon::disconnect_all() {
  Json gone = Json::array();
  reactor::run_and_wait(impl_->admin(), [&] {
    for (auto& entry : impl_->entries) {
      gone.push_back(impl_->describe(*entry));
      impl_->remove(*entry);
    }
    impl_->entries.clear();
  });
  return Json{{"disconnected", gone}};
}

Json Daemon::list() {
  Json controllers = Json::array();
  reactor::run_and_wait(impl_->admin(), [&] {
    for (const auto& entry : impl_->entries) controllers.push_back(impl_->describe(*entry));
  });
  return Json{{"controllers", controllers}};
}

}  // namespace nvmf::hostd
