// The rdma-core provider of the verbs interface: any RDMA NIC or soft-RoCE (rxe) through
// libibverbs and librdmacm. This header is all a program needs to choose the provider; it
// pulls in no rdma-core header.
//
// Lifetime: the provider outlives every channel and every object made from them (it caches
// one Device per RDMA device, shared by all CmIds on that device). Threading as verbs.h: the
// provider and its CM channels belong to one setup thread; QPs, CQs and SRQs to a reactor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "verbs/verbs.h"

struct ibv_context;

namespace nvmf::verbs::ibverbs {

class IbvDevice;

class IbverbsProvider final : public Provider {
 public:
  // Succeeds without any RDMA device (device_names() is then empty); failures come later,
  // from create_cm_channel() or the CM calls, with an Error naming the call.
  static Result<std::unique_ptr<IbverbsProvider>> create();
  ~IbverbsProvider() override;
  IbverbsProvider(const IbverbsProvider&) = delete;
  IbverbsProvider& operator=(const IbverbsProvider&) = delete;

  const char* name() const noexcept override { return "ibverbs"; }
  // ibv_get_device_list at each call: "mlx5_0", "rxe0", ...
  std::vector<std::string> device_names() const override;
  // rdma_create_event_channel: fails (no device, or ENODEV / ENOENT) when
  // /dev/infiniband/rdma_cm is missing, i.e. the rdma_ucm module or any RDMA device is.
  Result<std::unique_ptr<CmChannel>> create_cm_channel() noexcept override;

  // Internal (CmId::device()): the Device of an rdma_cm verbs context, made at first use.
  // nullptr if ibv_query_device fails (logged).
  IbvDevice* device_for(ibv_context* context) noexcept;

 private:
  IbverbsProvider() = default;
  std::vector<std::unique_ptr<IbvDevice>> devices_;
};

}  // namespace nvmf::verbs::ibverbs
