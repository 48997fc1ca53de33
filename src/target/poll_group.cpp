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
  lanes_.clear();
  // Closing a channel completes what it still holds as aborted: the commands of abandoned
  // queue pairs come back now, are dropped, and free their queue pairs.
  for (SubsystemSlot& slot : subsystems_) slot.ns.clear();  // owner thread
  retired_lanes_.clear();
  assert(abandoned_.empty());
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
    if (entry.lane) {
      // Never destroyed here: this may run inside a completion callback of that very channel.
      // poll() destroys it once no I/O is inside or waiting.
      retired_lanes_.push_back(std::move(entry.lane));  // setup-path
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
    entry.lane = std::make_unique<BdevLane>();  // setup-path
    entry.lane->channel = std::move(*channel);
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
    // A completion callback changed the namespace table while poll() walks lanes_:
    // rebuild after the walk.
    channel_list_stale_ = true;
    return;
  }
  channel_list_stale_ = false;
  lanes_.clear();
  for (SubsystemSlot& slot : subsystems_) {
    for (NsSlot& ns : slot.ns) {
      if (ns.lane) lanes_.push_back(ns.lane.get());  // setup-path
    }
  }
  for (auto& lane : retired_lanes_) lanes_.push_back(lane.get());  // setup-path
}

void PollGroup::destroy_drained_lanes() noexcept {
  bool drained = false;
  for (auto& lane : retired_lanes_) {
    if (lane->channel->outstanding() == 0 && lane->waiting.empty()) {
      lane.reset();
      drained = true;
    }
  }
  if (drained) {
    std::erase_if(retired_lanes_, [](const auto& lane) { return !lane; });
    rebuild_channel_list();
  }
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
  for (BdevLane* lane : lanes_) work += static_cast<int>(lane->channel->poll(budget));
  polling_channels_ = false;
  if (channel_list_stale_) rebuild_channel_list();
  if (pending_requests_ > 0) work += retry_pending(budget);
  if (!retired_lanes_.empty()) destroy_drained_lanes();
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

  // 2. Aborts addressed to commands of our queue pairs.
  process_aborts();

  // 3. Answers to Aborts our admin queues sent.
  IntrusiveList<Request, &Request::link> answered;
  {
    std::lock_guard lock(target_.mutex_);
    while (Request* req = abort_returns_.pop_front()) answered.push_back(*req);
  }
  while (Request* req = answered.pop_front()) detail::complete_abort(*req, spec::status_success);

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

void PollGroup::process_aborts() noexcept {
  // Taken off the inboxes under the lock, looked up without it (a transport answers the
  // command it finds from inside abort_request), answered under it again. Meanwhile the admin
  // queue that sent them stays: destroy_qpair waits while it has Aborts in flight.
  IntrusiveList<Request, &Request::link> looking;
  {
    std::lock_guard lock(target_.mutex_);
    for (Qpair& qpair : qpairs_) {
      auto& inbox = qpair.abort_inbox_;
      for (Request* abort = inbox.empty() ? nullptr : &inbox.front(); abort != nullptr;) {
        Request* next = inbox.next_of(*abort);
        if (!abort->abort_after_transfer) {  // those wait for refuse_aborted()
          inbox.remove(*abort);
          looking.push_back(*abort);
        }
        abort = next;
      }
    }
  }
  if (looking.empty()) return;
  for (Request& abort : looking) {
    const auto cid = static_cast<uint16_t>(abort.abort_target >> 16);
    const TransportAbort found = abort_on_qpair(*abort.abort_qpair, cid);
    // DW0 bit 0: 0 = the command was aborted, 1 = it was not (it completed, is inside a bdev
    // that cannot recall it, or was never there).
    abort.rsp.cdw0 = found == TransportAbort::not_found ? 1 : 0;
    abort.abort_after_transfer = found == TransportAbort::after_transfer;
  }
  std::lock_guard lock(target_.mutex_);
  while (Request* abort = looking.pop_front()) {
    if (abort->abort_after_transfer) {
      abort->abort_qpair->abort_inbox_.push_back(*abort);
    } else {
      abort->qpair->group_.answer_abort_locked(*abort);
    }
  }
}

TransportAbort PollGroup::abort_on_qpair(Qpair& qpair, uint16_t cid) noexcept {
  owner_.check();
  Request* found = nullptr;
  for (size_t i = 0; i < lanes_.size() && found == nullptr && qpair.waiting_for_bdev_ > 0; ++i) {
    for (Request& waiting : lanes_[i]->waiting) {
      if (waiting.qpair == &qpair && waiting.cmd.cid == cid) {
        found = &waiting;
        break;
      }
    }
  }
  if (found != nullptr) {
    // Completed after the walk: a completion may execute new commands, which may change lanes_.
    leave_lane(*found);
    found->state = RequestState::complete;
    detail::complete_status(*found, spec::generic_status(spec::sc_generic::abort_requested));
    return TransportAbort::aborted;
  }
  // Not in the core: maybe still in the transport, before execute().
  if (qpair.ops_.abort_request == nullptr) return TransportAbort::not_found;
  return qpair.ops_.abort_request(qpair.ops_.ctx, qpair, cid);
}

void PollGroup::answer_abort_locked(Request& abort) noexcept {
  abort_returns_.push_back(abort);
  raise_attention();
}

void PollGroup::fail_pending(Qpair& qpair, const spec::Status& status) noexcept {
  if (qpair.waiting_for_bdev_ == 0) return;
  IntrusiveList<Request, &Request::link> failed;
  for (BdevLane* lane : lanes_) {
    auto& waiting = lane->waiting;
    for (Request* req = waiting.empty() ? nullptr : &waiting.front(); req != nullptr;) {
      Request* next = waiting.next_of(*req);
      if (req->qpair == &qpair) {
        leave_lane(*req);
        failed.push_back(*req);
      }
      req = next;
    }
  }
  // Completed after the walk: a completion may execute new commands, which may change lanes_.
  while (Request* req = failed.pop_front()) {
    req->state = RequestState::complete;
    detail::complete_status(*req, status);
  }
}

void PollGroup::abandon(Qpair& qpair) noexcept {
  owner_.check();
  qpairs_.remove(qpair);
  abandoned_.push_back(qpair);
  qpair.set_state(QpairState::abandoned);
  PollGroupCounters::bump(counters_.abandoned_qpairs);
}

}  // namespace nvmf::target
