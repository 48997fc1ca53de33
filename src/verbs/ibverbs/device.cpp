// Device, PD and the objects made from a PD: setup path, each call checked against the
// device's limits first and against what the device granted afterwards (STYLE.md point 8).
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {

Result<std::unique_ptr<IbvDevice>> IbvDevice::create(ibv_context* context) noexcept {
  const char* name = ibv_get_device_name(context->device);
  ibv_device_attr_ex attr_ex{};
  int rc = normalise_errno(ibv_query_device_ex(context, nullptr, &attr_ex));
  if (rc == EOPNOTSUPP || rc == ENOSYS) {
    rc = normalise_errno(ibv_query_device(context, &attr_ex.orig_attr));
  }
  if (rc != 0) {
    NVMF_ERRLOG(ibverbs, "%s: ibv_query_device failed: %s", name, strerror(rc));
    return Unexpected(make_system_error(rc, "ibv_query_device"));
  }
  std::unique_ptr<IbvDevice> device(new (std::nothrow) IbvDevice());  // setup-path
  if (device == nullptr) return Unexpected(Errc::no_memory, "device wrapper");
  try {
    device->caps_ = caps_from_attr(name, attr_ex.orig_attr);
  } catch (...) {
    return Unexpected(Errc::no_memory, "device caps");
  }
  device->context_ = context;
  // poll_async_event() must not block: the stack polls the fd. Without it the device still
  // works; its async events go unread (logged once here).
  const int async_flags = fcntl(context->async_fd, F_GETFL);
  device->async_ready_ =
      async_flags >= 0 && fcntl(context->async_fd, F_SETFL, async_flags | O_NONBLOCK) == 0;
  if (!device->async_ready_) {
    NVMF_ERRLOG(ibverbs,
                "%s: fcntl(O_NONBLOCK) on the async event fd failed: %s; async events "
                "(QP fatal, port down, device fatal) will not be seen",
                name, strerror(errno));
  }
  device->quirks_ = wc_quirks_for(name, attr_ex.orig_attr);
  device->max_srq_sge_ = static_cast<uint32_t>(attr_ex.orig_attr.max_srq_sge);
  const DeviceCaps& caps = device->caps_;
  NVMF_INFOLOG(ibverbs,
               "%s: max_qp_wr %u, max_sge %u, max_cqe %u, max_srq_wr %u, max_qp_rd_atom %u, "
               "max_qp_init_rd_atom %u, max_mw %u, mw type 2 %s, mem mgt ext %s%s",
               caps.name.c_str(), caps.max_qp_wr, caps.max_sge, caps.max_cqe, caps.max_srq_wr,
               caps.max_qp_rd_atom, caps.max_qp_init_rd_atom, caps.max_mw,
               caps.memory_window_type2 ? "yes" : "no",
               caps.memory_management_extensions ? "yes" : "no",
               device->quirks_.invalidate_flag_in_bit2 ? ", rxe remote-invalidate flag" : "");
  return device;
}

bool IbvDevice::poll_async_event(AsyncEvent* event) noexcept {
  if (!async_ready_) return false;
  for (;;) {
    ibv_async_event raw{};
    if (ibv_get_async_event(context_, &raw) != 0) {
      const int os_errno = errno;
      if (os_errno != EAGAIN && os_errno != EWOULDBLOCK) {
        NVMF_WARNLOG(ibverbs, "%s: ibv_get_async_event failed: %s", caps_.name.c_str(),
                     strerror(os_errno));
      }
      return false;
    }
    const bool known = to_async_event(raw, event);
    const unsigned type = raw.event_type;
    ibv_ack_async_event(&raw);  // after the copy: see the header
    if (known) return true;
    NVMF_WARNLOG(ibverbs, "%s: unknown async event type %u dropped", caps_.name.c_str(), type);
  }
}

Result<std::unique_ptr<ProtectionDomain>> IbvDevice::allocate_pd() noexcept {
  ibv_pd* pd = ibv_alloc_pd(context_);
  if (pd == nullptr) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "%s: ibv_alloc_pd failed: %s", caps_.name.c_str(), strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "ibv_alloc_pd"));
  }
  std::unique_ptr<ProtectionDomain> domain(new (std::nothrow)
                                               IbvProtectionDomain(pd, this));  // setup-path
  if (domain == nullptr) {
    ibv_dealloc_pd(pd);
    return Unexpected(Errc::no_memory, "PD wrapper");
  }
  return domain;
}

IbvProtectionDomain::~IbvProtectionDomain() {
  const int rc = normalise_errno(ibv_dealloc_pd(pd_));
  if (rc != 0) {
    // EBUSY: an MR, MW, CQ-less object or QP of this PD still exists.
    NVMF_ERRLOG(ibverbs, "ibv_dealloc_pd failed: %s (destroy its MRs, MWs, SRQs, QPs first)",
                strerror(rc));
  }
}

Result<std::unique_ptr<MemoryRegion>> IbvProtectionDomain::register_memory(
    void* addr, size_t length, uint32_t access) noexcept {
  const DeviceCaps& caps = device_->caps();
  if (caps.max_mr_size != 0 && length > caps.max_mr_size) {
    NVMF_ERRLOG(ibverbs, "%s: registering %zu bytes exceeds the device's max_mr_size %llu",
                caps.name.c_str(), length, static_cast<unsigned long long>(caps.max_mr_size));
    return Unexpected(Errc::invalid_argument, "registration exceeds the device's max_mr_size");
  }
  ibv_mr* mr = ibv_reg_mr(pd_, addr, length, static_cast<int>(access));
  if (mr == nullptr) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "%s: ibv_reg_mr of %zu bytes (access 0x%x) failed: %s%s",
                caps.name.c_str(), length, access, strerror(os_errno),
                os_errno == ENOMEM || os_errno == EPERM
                    ? " (pinned memory is capped by RLIMIT_MEMLOCK: raise `ulimit -l`)"
                    : "");
    return Unexpected(make_system_error(os_errno, "ibv_reg_mr"));
  }
  std::unique_ptr<MemoryRegion> region(
      new (std::nothrow) IbvMemoryRegion(kRdmaCoreOps, mr, access));  // setup-path
  if (region == nullptr) {
    ibv_dereg_mr(mr);
    return Unexpected(Errc::no_memory, "MR wrapper");
  }
  return region;
}

Result<std::unique_ptr<MemoryWindow>> IbvProtectionDomain::allocate_window() noexcept {
  const DeviceCaps& caps = device_->caps();
  if (!caps.memory_window_type2) {
    NVMF_ERRLOG(ibverbs,
                "%s: no type-2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2B unset); "
                "use a memory registration mode without windows",
                caps.name.c_str());
    return Unexpected(Errc::not_supported, "device lacks type-2 memory windows");
  }
  ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    const int os_errno = errno != 0 ? errno : ENOMEM;
    NVMF_ERRLOG(ibverbs, "%s: ibv_alloc_mw(IBV_MW_TYPE_2) failed: %s (device max_mw %u)",
                caps.name.c_str(), strerror(os_errno), caps.max_mw);
    return Unexpected(make_system_error(os_errno, "ibv_alloc_mw"));
  }
  std::unique_ptr<MemoryWindow> window(new (std::nothrow)
                                           IbvMemoryWindow(kRdmaCoreOps, mw));  // setup-path
  if (window == nullptr) {
    ibv_dealloc_mw(mw);
    return Unexpected(Errc::no_memory, "MW wrapper");
  }
  return window;
}

Result<std::unique_ptr<CompletionQueue>> IbvProtectionDomain::create_cq(
    const CqOpts& opts) noexcept {
  const DeviceCaps& caps = device_->caps();
  if (opts.depth == 0 || opts.depth > caps.max_cqe || opts.depth > INT32_MAX) {
    NVMF_ERRLOG(ibverbs, "%s: CqOpts::depth %u is outside 1..max_cqe %u", caps.name.c_str(),
                opts.depth, caps.max_cqe);
    return Unexpected(Errc::invalid_argument, "CqOpts::depth exceeds the device's max_cqe");
  }
  ibv_context* context = device_->context();
  ibv_comp_channel* channel = nullptr;
  if (opts.with_event_fd) {
    channel = ibv_create_comp_channel(context);
    if (channel == nullptr) {
      const int os_errno = errno;
      NVMF_ERRLOG(ibverbs, "%s: ibv_create_comp_channel failed: %s", caps.name.c_str(),
                  strerror(os_errno));
      return Unexpected(make_system_error(os_errno, "ibv_create_comp_channel"));
    }
    // consume_event() must not block: the reactor polls the fd.
    const int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      const int os_errno = errno;
      ibv_destroy_comp_channel(channel);
      return Unexpected(make_system_error(os_errno, "fcntl(O_NONBLOCK) on the CQ channel"));
    }
  }
  ibv_cq* cq = ibv_create_cq(context, static_cast<int>(opts.depth), nullptr, channel, 0);
  if (cq == nullptr) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "%s: ibv_create_cq(%u) failed: %s (lower CqOpts::depth)",
                caps.name.c_str(), opts.depth, strerror(os_errno));
    if (channel != nullptr) ibv_destroy_comp_channel(channel);
    return Unexpected(make_system_error(os_errno, "ibv_create_cq"));
  }
  if (static_cast<uint32_t>(cq->cqe) < opts.depth) {
    NVMF_ERRLOG(ibverbs, "%s: ibv_create_cq granted %d entries, asked %u", caps.name.c_str(),
                cq->cqe, opts.depth);
    ibv_destroy_cq(cq);
    if (channel != nullptr) ibv_destroy_comp_channel(channel);
    return Unexpected(Errc::no_memory, "CQ granted fewer entries than CqOpts::depth");
  }
  std::unique_ptr<CompletionQueue> queue(new (std::nothrow) IbvCompletionQueue(
      kRdmaCoreOps, cq, channel, device_->quirks()));  // setup-path
  if (queue == nullptr) {
    ibv_destroy_cq(cq);
    if (channel != nullptr) ibv_destroy_comp_channel(channel);
    return Unexpected(Errc::no_memory, "CQ wrapper");
  }
  cq->cq_context = queue.get();  // a CQ_ERR event names the CQ by it (to_async_event)
  return queue;
}

Result<std::unique_ptr<SharedReceiveQueue>> IbvProtectionDomain::create_srq(
    const SrqOpts& opts) noexcept {
  const DeviceCaps& caps = device_->caps();
  if (caps.max_srq_wr == 0) {
    NVMF_ERRLOG(ibverbs, "%s: the device has no SRQ support; run without a shared receive queue",
                caps.name.c_str());
    return Unexpected(Errc::not_supported, "device lacks SRQ support");
  }
  if (opts.max_wr == 0 || opts.max_wr > caps.max_srq_wr) {
    NVMF_ERRLOG(ibverbs, "%s: SrqOpts::max_wr %u is outside 1..max_srq_wr %u", caps.name.c_str(),
                opts.max_wr, caps.max_srq_wr);
    return Unexpected(Errc::invalid_argument, "SrqOpts::max_wr exceeds the device's max_srq_wr");
  }
  if (opts.max_sge == 0 || opts.max_sge > device_->max_srq_sge()) {
    NVMF_ERRLOG(ibverbs, "%s: SrqOpts::max_sge %u is outside 1..max_srq_sge %u", caps.name.c_str(),
                opts.max_sge, device_->max_srq_sge());
    return Unexpected(Errc::invalid_argument, "SrqOpts::max_sge exceeds the device's max_srq_sge");
  }
  ibv_srq_init_attr init_attr{};
  init_attr.attr.max_wr = opts.max_wr;
  init_attr.attr.max_sge = opts.max_sge;
  ibv_srq* srq = ibv_create_srq(pd_, &init_attr);
  if (srq == nullptr) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "%s: ibv_create_srq(max_wr %u, max_sge %u) failed: %s", caps.name.c_str(),
                opts.max_wr, opts.max_sge, strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "ibv_create_srq"));
  }
  ibv_srq_attr granted{};
  const int rc = normalise_errno(ibv_query_srq(srq, &granted));
  if (rc != 0) {
    ibv_destroy_srq(srq);
    return Unexpected(make_system_error(rc, "ibv_query_srq"));
  }
  if (granted.max_wr < opts.max_wr || granted.max_sge < opts.max_sge) {
    NVMF_ERRLOG(ibverbs, "%s: SRQ granted max_wr %u max_sge %u, asked %u and %u", caps.name.c_str(),
                granted.max_wr, granted.max_sge, opts.max_wr, opts.max_sge);
    ibv_destroy_srq(srq);
    return Unexpected(Errc::no_memory, "SRQ granted less than SrqOpts asked");
  }
  auto queue = IbvSharedReceiveQueue::create(kRdmaCoreOps, srq, granted.max_wr, granted.max_sge);
  if (!queue) return Unexpected(queue.error());
  // An SRQ event names the SRQ by it (to_async_event): the interface's pointer.
  srq->srq_context = static_cast<SharedReceiveQueue*>(queue->get());
  return std::unique_ptr<SharedReceiveQueue>(std::move(*queue));
}

}  // namespace nvmf::verbs::ibverbs
