#include "transport_rdma/host_async_events.h"

#include <cstdio>

#include "common/log.h"

NVMF_LOG_COMPONENT(rdma_async);

namespace nvmf::transport_rdma {

namespace {

using verbs::AsyncEventType;

constexpr uint32_t bit_of(AsyncEventType type) noexcept {
  return 1u << static_cast<unsigned>(type);
}

// Events that fail a queue, worst first: the first one marked is the one reported.
constexpr AsyncEventType kFailingEvents[] = {
    AsyncEventType::device_fatal, AsyncEventType::cq_error, AsyncEventType::qp_fatal,
    AsyncEventType::qp_access_error, AsyncEventType::qp_request_error};

bool fails_its_qp(AsyncEventType type) noexcept {
  return type == AsyncEventType::qp_fatal || type == AsyncEventType::qp_request_error ||
         type == AsyncEventType::qp_access_error;
}

}  // namespace

HostAsyncWatch::Failure HostAsyncWatch::take() noexcept {
  const uint32_t bits = pending_.exchange(0, std::memory_order_acquire);
  Failure failure;
  for (AsyncEventType type : kFailingEvents) {
    if ((bits & bit_of(type)) == 0) continue;
    failure.type = type;
    break;
  }
  failure.completions_lost =
      (bits & (bit_of(AsyncEventType::device_fatal) | bit_of(AsyncEventType::cq_error))) != 0;
  std::snprintf(reason_, sizeof(reason_), "%s async event on device %s",
                verbs::async_event_type_name(failure.type),
                device_ != nullptr ? device_->caps().name.c_str() : "?");
  failure.reason = reason_;
  return failure;
}

HostAsyncEvents::~HostAsyncEvents() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (watches_.pop_front() != nullptr) {
  }
}

void HostAsyncEvents::add(HostAsyncWatch& watch, verbs::Device& device, uint32_t qp_num,
                          const verbs::CompletionQueue& cq) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  bool known = false;
  for (verbs::Device* seen : devices_) known |= seen == &device;
  if (!known) {
    try {
      devices_.push_back(&device);  // setup-path
    } catch (...) {
      NVMF_ERRLOG(rdma_async, "device %s: out of memory: its async events go unread",
                  device.caps().name.c_str());
    }
  }
  watch.device_ = &device;
  watch.qp_num_ = qp_num;
  watch.cq_ = &cq;
  watch.pending_.store(0, std::memory_order_relaxed);
  if (!watch.link_.linked()) watches_.push_back(watch);
}

void HostAsyncEvents::remove(HostAsyncWatch& watch) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (watch.link_.linked()) watches_.remove(watch);
  watch.pending_.store(0, std::memory_order_relaxed);
}

int HostAsyncEvents::poll() noexcept {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;  // another queue's thread is reading them right now
  int read = 0;
  for (verbs::Device* device : devices_) {
    verbs::AsyncEvent event;
    while (device->poll_async_event(&event)) {
      ++read;
      counts_[static_cast<size_t>(event.type)].fetch_add(1, std::memory_order_relaxed);
      dispatch(*device, event);
    }
  }
  return read;
}

void HostAsyncEvents::dispatch(verbs::Device& device, const verbs::AsyncEvent& event) noexcept {
  const char* name = verbs::async_event_type_name(event.type);
  const char* device_name = device.caps().name.c_str();
  size_t marked = 0;
  for (HostAsyncWatch& watch : watches_) {
    if (watch.device_ != &device) continue;
    const bool hit = event.type == AsyncEventType::device_fatal ||
                     (fails_its_qp(event.type) && watch.qp_num_ == event.qp_num) ||
                     (event.type == AsyncEventType::cq_error && watch.cq_ == event.cq);
    if (!hit) continue;
    watch.pending_.fetch_or(bit_of(event.type), std::memory_order_release);
    ++marked;
  }
  // A queue it failed logs the line itself when it fails (with its QID and address).
  switch (event.type) {
    case AsyncEventType::device_fatal:
      NVMF_ERRLOG(rdma_async,
                  "device %s: DEVICE_FATAL: its %zu queues fail and reconnect; they cannot "
                  "succeed until the device is reset (see dmesg, reload its driver)",
                  device_name, marked);
      break;
    case AsyncEventType::port_error:
      NVMF_WARNLOG(rdma_async,
                   "device %s: PORT_ERR on port %u: its queues fail as their "
                   "retries run out and reconnect once the link is back",
                   device_name, event.port_num);
      break;
    case AsyncEventType::port_active:
      NVMF_NOTICELOG(rdma_async, "device %s: PORT_ACTIVE on port %u", device_name, event.port_num);
      break;
    default:
      if (marked == 0) {
        NVMF_DEBUGLOG(rdma_async, "device %s: %s (QP %u, port %u): no queue of ours", device_name,
                      name, event.qp_num, event.port_num);
      }
      break;
  }
}

}  // namespace nvmf::transport_rdma
