// PollGroup: per-reactor channels, the poller, and the attention mailbox. The I/O command
// state machine is in io.cpp.
#include "target/poll_group.h"

#include "common/log.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);

namespace nvmf::target {

PollGroup::PollGroup(Target& target, reactor::Reactor& reactor)
    : target_(target), reactor_(reactor), poller_("nvmf poll group", &PollGroup::poll_fn, this) {
  if (auto added = reactor_.add_poller(poller_); !added) {
    // Only fails for a poller already registered: a programming error.
    NVMF_ERRLOG(target, "poll group on %s: cannot add poller", reactor_.name());
    assert(false);
  }
}

PollGroup::~PollGroup() {
  if (!released()) shutdown();
}

void PollGroup::shutdown() noexcept {
  owner_.check();
  assert(qpairs_.empty() && "destroy every queue pair before releasing the reactor");
  released_.store(true, std::memory_order_release);
  reactor_.remove_poller(poller_);
  channels_.clear();
  for (SubsystemSlot& slot : subsystems_) slot.ns.clear();  // closes the channels (owner thread)
  retired_channels_.clear();
}

void PollGroup::raise_attention() noexcept {
  if (released()) return;
  if (attention_.exchange(true, std::memory_order_acq_rel)) return;  // already raised
  // Wakes a sleeping reactor. When the ring is full the flag alone suffices: the poller checks
  // it every iteration, and a reactor with a full ring is not asleep.
  (void)reactor_.send(&PollGroup::attention_message, this);
}

void PollGroup::attention_message(void* ctx) noexcept {
  auto* group = static_cast<PollGroup*>(ctx);
  if (group->released()) return;
  if (group->attention_.load(std::memory_order_acquire)) group->process_attention();
}

void PollGroup::add_qpair(Qpair& qpair) noexcept {
  owner_.check();
  qpairs_.push_back(qpair);
}

void PollGroup::remove_qpair(Qpair& qpair) noexcept {
  owner_.check();
  qpairs_.remove(qpair);
}

void PollGroup::prepare_subsystem(Subsystem& subsystem) {
  owner_.check();
  if (subsystems_.size() <= subsystem.id()) subsystems_.resize(subsystem.id() + 1);  // setup-path
  SubsystemSlot& slot = subsystems_[subsystem.id()];
  slot.subsystem = &subsystem;
  // Open the channels now (setup path) rather than on the first I/O.
  if (slot.generation != subsystem.ns_generation()) refresh_namespaces(slot);
}

PollGroup::NsSlot* PollGroup::lookup_namespace(Subsystem& subsystem, uint32_t nsid) noexcept {
  if (subsystem.id() >= subsystems_.size()) return nullptr;
  SubsystemSlot& slot = subsystems_[subsystem.id()];
  if (slot.subsystem == nullptr) return nullptr;  // no I/O queue of it connected here
  // One acquire load per command: a namespace added or removed since the last look makes this
  // reactor refresh its table first (control path, rare).
  if (slot.generation != subsystem.ns_generation()) refresh_namespaces(slot);
  if (nsid == 0 || nsid > slot.ns.size()) return nullptr;
  NsSlot& ns = slot.ns[nsid - 1];
  return ns.channel ? &ns : nullptr;
}

void PollGroup::refresh_namespaces(SubsystemSlot& slot) noexcept {
  Subsystem& subsystem = *slot.subsystem;
  uint64_t generation = 0;
  {
    std::lock_guard lock(target_.mutex_);
    generation = subsystem.ns_generation();
    snapshot_.assign(subsystem.max_namespaces(), nullptr);  // setup-path
    if (!subsystem.removed()) {
      for (uint32_t i = 0; i < subsystem.max_namespaces(); ++i) {
        snapshot_[i] = subsystem.namespaces()[i].get();
      }
    }
  }
  if (slot.ns.size() < snapshot_.size()) slot.ns.resize(snapshot_.size());  // setup-path
  for (size_t i = 0; i < slot.ns.size(); ++i) {
    Namespace* now = i < snapshot_.size() ? snapshot_[i] : nullptr;
    NsSlot& entry = slot.ns[i];
    if (entry.ns == now) continue;
    if (entry.channel) {
      // Never destroyed here: this may run inside a completion callback of that very channel.
      // poll() destroys it once no I/O is inside.
      retired_channels_.push_back(std::move(entry.channel));  // setup-path
    }
    entry = NsSlot{};
    if (now == nullptr) continue;
    auto channel = now->bdev().create_channel();  // setup-path
    if (!channel) {
      NVMF_ERRLOG(target, "%s: namespace %u: cannot open a channel to bdev %s on %s: %s",
                  subsystem.nqn().c_str(), now->nsid(), now->bdev().name().c_str(), reactor_.name(),
                  errc_name(channel.error().code));
      continue;  // the NSID reads as inactive on this reactor
    }
    entry.ns = now;
    entry.channel = std::move(*channel);
    entry.block_size = now->bdev().block_size_bytes();
    entry.block_shift = 0;
    while ((1u << entry.block_shift) < entry.block_size) ++entry.block_shift;
    entry.block_count = now->bdev().block_count();
    entry.io_types = now->bdev().supported_io_types();
  }
  slot.generation = generation;
  rebuild_channel_list();
}

void PollGroup::rebuild_channel_list() noexcept {
  if (polling_channels_) {
    // A completion callback changed the namespace table while poll() walks channels_:
    // rebuild after the walk.
    channel_list_stale_ = true;
    return;
  }
  channel_list_stale_ = false;
  channels_.clear();
  for (SubsystemSlot& slot : subsystems_) {
    for (NsSlot& ns : slot.ns) {
      if (ns.channel) channels_.push_back(ns.channel.get());  // setup-path
    }
  }
  for (auto& channel : retired_channels_) channels_.push_back(channel.get());  // setup-path
}

int PollGroup::poll_fn(void* ctx, unsigned budget) noexcept {
  return static_cast<PollGroup*>(ctx)->poll(budget);
}

int PollGroup::poll(unsigned budget) noexcept {
  int work = 0;
  if (attention_.load(std::memory_order_acquire)) {
    process_attention();
    ++work;
  }
  polling_channels_ = true;
  for (bdev::IoChannel* channel : channels_) work += static_cast<int>(channel->poll(budget));
  polling_channels_ = false;
  if (channel_list_stale_) rebuild_channel_list();
  if (pending_requests_ > 0) work += retry_pending(budget);
  if (!retired_channels_.empty()) {
    bool drained = false;
    for (auto& channel : retired_channels_) {
      if (channel->outstanding() == 0) {
        channel.reset();
        drained = true;
      }
    }
    if (drained) {
      std::erase_if(retired_channels_, [](const auto& channel) { return !channel; });
      rebuild_channel_list();
    }
  }
  // Commands inside a bdev or waiting for one: stay awake (null and malloc channels have no
  // interrupt fd, so a sleeping reactor would never see their completions).
  if (work == 0 && (in_bdev_ > 0 || pending_requests_ > 0)) work = 1;
  return work;
}

void PollGroup::process_attention() noexcept {
  owner_.check();
  attention_.store(false, std::memory_order_release);

  // 1. Queue pairs someone wants torn down. The callback may destroy the queue pair.
  for (Qpair* qpair = qpairs_.empty() ? nullptr : &qpairs_.front(); qpair != nullptr;) {
    Qpair* next = qpairs_.next_of(*qpair);
    if (!qpair->disconnect_notified_ &&
        qpair->disconnect_requested_.load(std::memory_order_acquire)) {
      qpair->disconnect_notified_ = true;
      qpair->ops_.qpair_disconnect(qpair->ops_.ctx, *qpair);
    }
    qpair = next;
  }

  // 2. Aborts addressed to commands of our queue pairs. Only commands still waiting for the
  //    bdev can be aborted; one inside the bdev runs to completion ("not aborted").
  IntrusiveList<Request, &Request::link> aborted;
  {
    std::lock_guard lock(target_.mutex_);
    for (Qpair& qpair : qpairs_) {
      while (Request* abort = qpair.abort_inbox_.pop_front()) {
        const auto cid = static_cast<uint16_t>(abort->abort_target >> 16);
        abort->rsp.cdw0 = 1;
        for (Request& waiting : qpair.pending_) {
          if (waiting.cmd.cid != cid) continue;
          qpair.pending_.remove(waiting);
          --pending_requests_;
          aborted.push_back(waiting);
          abort->rsp.cdw0 = 0;
          break;
        }
        PollGroup& home = abort->qpair->group_;
        home.abort_returns_.push_back(*abort);
        home.raise_attention();
      }
    }
  }
  while (Request* req = aborted.pop_front()) {
    detail::complete_status(*req, spec::generic_status(spec::sc_generic::abort_requested));
  }

  // 3. Answers to Aborts our admin queues sent.
  IntrusiveList<Request, &Request::link> answered;
  {
    std::lock_guard lock(target_.mutex_);
    while (Request* req = abort_returns_.pop_front()) answered.push_back(*req);
  }
  while (Request* req = answered.pop_front()) detail::complete_status(*req, spec::status_success);

  // 4. Asynchronous events of controllers whose admin queue lives here.
  for (Qpair& qpair : qpairs_) {
    if (qpair.connected() && qpair.is_admin()) qpair.controller_->process_events();
  }

  // 5. Namespace tables that are out of date (a namespace was added or removed).
  for (SubsystemSlot& slot : subsystems_) {
    if (slot.subsystem != nullptr && slot.generation != slot.subsystem->ns_generation()) {
      refresh_namespaces(slot);
    }
  }
}

void PollGroup::fail_pending(Qpair& qpair, const spec::Status& status) noexcept {
  while (Request* req = qpair.pending_.pop_front()) {
    --pending_requests_;
    detail::complete_status(*req, status);
  }
}

}  // namespace nvmf::target
