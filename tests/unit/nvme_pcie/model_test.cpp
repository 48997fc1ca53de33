// The NVMe PCIe controller model, driven by hand through its registers like a tiny polled
// driver (ModelHost below): bring-up, Identify, queues, PRP and SGL data transfer, completion
// queue phase and flow control, fault injection, reset, shutdown and surprise removal.
#include "nvme_pcie/model/model_controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "log_capture.h"
#include "spec/admin.h"
#include "spec/fabrics.h"
#include "spec/pcie.h"
#include "spec/string_field.h"

namespace nvmf::nvme_pcie::model {
namespace {

using spec::Cqe;
using spec::Sqe;
using spec::Status;
namespace pcie = spec::pcie;
namespace reg = spec::pcie::reg;
namespace property = spec::property_offset;
namespace sc = spec::sc_generic;
namespace scc = spec::sc_command;

constexpr uint32_t kPage = 4096;
constexpr uint32_t kNsBlocks = (16u << 20) / 512;  // 16 MiB namespaces keep tests quick

ModelOpts small_opts() {
  ModelOpts opts;
  opts.namespaces[0].block_count = kNsBlocks;
  return opts;
}

uint32_t default_cc() {
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = pcie::io_sq_entry_size_log2;
  cc.iocqes = pcie::io_cq_entry_size_log2;
  return spec::encode_cc(cc);
}

::testing::AssertionResult has_status(const Cqe& cqe, uint8_t type, uint8_t code) {
  const Status status = cqe.decoded_status();
  if (status.sct == type && status.sc == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "status SCT " << int{status.sct} << " SC 0x" << std::hex << int{status.sc} << " ("
         << spec::status_name(status) << "), expected SCT " << int{type} << " SC 0x" << int{code};
}
::testing::AssertionResult ok(const Cqe& cqe) { return has_status(cqe, spec::sct::generic, 0); }

// A polled host over the model's BAR0: admin queue bring-up, I/O queue pairs, submission and
// completion with phase tracking. Regions are members declared after the model, so they are
// freed before it.
struct Queue {
  uint16_t qid = 0;
  uint32_t entries = 0;
  env::DmaRegion sq;
  env::DmaRegion cq;
  uint32_t sq_tail = 0;
  uint32_t cq_head = 0;
  bool phase = true;
  uint16_t next_cid = 0;
};

class ModelHost {
 public:
  explicit ModelHost(const ModelOpts& opts = small_opts()) {
    auto created = ModelController::create(opts);
    EXPECT_TRUE(created.has_value());
    if (created) model = std::move(*created);
  }

  env::DmaRegion alloc(size_t bytes) {
    auto region = model->dma_memory().allocate(bytes, kPage);
    EXPECT_TRUE(region.has_value());
    return region ? std::move(*region) : env::DmaRegion{};
  }
  uint64_t iova(const env::DmaRegion& region, size_t offset = 0) const {
    return model->dma_address(static_cast<uint8_t*>(region.addr()) + offset, 1);
  }
  uint32_t stride() { return pcie::doorbell_stride_bytes(model->read64(property::cap)); }
  uint32_t csts() { return model->read32(property::csts); }

  // Programs the admin queue and sets CC.EN; waits for RDY (or CFS) within `max_reads`.
  bool enable(uint32_t entries = 16, uint32_t cc = default_cc(), int max_reads = 100) {
    admin = Queue{};
    admin.entries = entries;
    admin.sq = alloc(entries * sizeof(Sqe));
    admin.cq = alloc(entries * sizeof(Cqe));
    model->write32(reg::aqa, pcie::make_aqa(entries, entries));
    model->write64(reg::asq, iova(admin.sq));
    model->write64(reg::acq, iova(admin.cq));
    model->write32(property::cc, cc);
    return wait_rdy(true, max_reads);
  }
  bool wait_rdy(bool rdy, int max_reads = 100) {
    for (int i = 0; i < max_reads; ++i) {
      const uint32_t status = csts();
      if (spec::csts_rdy(status) == rdy) return true;
      if (spec::csts_cfs(status)) return false;
    }
    return false;
  }
  bool disable() {
    model->write32(property::cc, 0);
    io.clear();
    return wait_rdy(false);
  }

  uint16_t submit(Queue& q, Sqe sqe) {
    sqe.cid = ++q.next_cid;
    std::memcpy(static_cast<uint8_t*>(q.sq.addr()) + q.sq_tail * sizeof(Sqe), &sqe, sizeof(sqe));
    q.sq_tail = (q.sq_tail + 1) % q.entries;
    model->write32(pcie::sq_tail_doorbell(q.qid, stride()), q.sq_tail);
    return sqe.cid;
  }
  std::optional<Cqe> poll(Queue& q, bool ring_doorbell = true) {
    auto* slot = static_cast<Cqe*>(q.cq.addr()) + q.cq_head;
    const uint16_t status = std::atomic_ref<uint16_t>(slot->status).load(std::memory_order_acquire);
    if (spec::status_field_phase(status) != q.phase) return std::nullopt;
    Cqe cqe;
    std::memcpy(&cqe, slot, sizeof(cqe));
    q.cq_head = (q.cq_head + 1) % q.entries;
    if (q.cq_head == 0) q.phase = !q.phase;
    if (ring_doorbell) ring_cq(q);
    return cqe;
  }
  void ring_cq(Queue& q) { model->write32(pcie::cq_head_doorbell(q.qid, stride()), q.cq_head); }
  Cqe execute(Queue& q, const Sqe& sqe) {
    const uint16_t cid = submit(q, sqe);
    std::optional<Cqe> cqe = poll(q);
    if (!cqe) {
      ADD_FAILURE() << "no completion for opcode 0x" << std::hex << int{sqe.opcode};
      Cqe none{};
      none.set_status(spec::generic_status(0xFF));
      return none;
    }
    EXPECT_EQ(cqe->cid, cid);
    EXPECT_EQ(cqe->sqid, q.qid);
    return *cqe;
  }
  Cqe admin_command(const Sqe& sqe) { return execute(admin, sqe); }

  Cqe create_cq(uint16_t qid, uint32_t entries, uint64_t base) {
    return admin_command(pcie::make_create_io_cq(0, qid, entries, base));
  }
  Cqe create_sq(uint16_t qid, uint32_t entries, uint64_t base, uint16_t cqid) {
    return admin_command(pcie::make_create_io_sq(0, qid, entries, base, cqid));
  }
  // A CQ and an SQ with the same QID and size.
  Queue& create_io_queue(uint16_t qid, uint32_t entries = 64, uint32_t cq_entries = 0) {
    Queue& q = io[qid];
    q = Queue{};
    q.qid = qid;
    q.entries = entries;
    const uint32_t cq_size = cq_entries == 0 ? entries : cq_entries;
    q.sq = alloc(entries * sizeof(Sqe));
    q.cq = alloc(cq_size * sizeof(Cqe));
    EXPECT_TRUE(ok(create_cq(qid, cq_size, iova(q.cq))));
    EXPECT_TRUE(ok(create_sq(qid, entries, iova(q.sq), qid)));
    return q;
  }

  Cqe identify(uint8_t cns, uint32_t nsid, const env::DmaRegion& buffer) {
    Sqe sqe = spec::make_identify(0, cns, nsid);
    pcie::sqe_set_prps(sqe, iova(buffer), 0);
    return admin_command(sqe);
  }

  std::unique_ptr<ModelController> model;
  Queue admin;
  std::map<uint16_t, Queue> io;
};

Sqe make_rw(uint8_t opcode, uint32_t nsid, uint64_t lba, uint32_t blocks, uint64_t prp1,
            uint64_t prp2 = 0) {
  Sqe sqe = pcie::make_pcie_sqe(opcode, 0, nsid);
  spec::rw_set_range(sqe, lba, blocks);
  pcie::sqe_set_prps(sqe, prp1, prp2);
  return sqe;
}

// The host side of "Physical Region Page Entry and List", written independently of the model:
// `list` (contiguous, page-aligned pages) receives the entries starting at `list_offset`.
void build_prps(uint64_t data_iova, uint64_t length, uint8_t* list, uint64_t list_iova,
                size_t list_offset, uint64_t* prp1, uint64_t* prp2) {
  *prp1 = data_iova;
  const uint64_t first = std::min<uint64_t>(length, kPage - data_iova % kPage);
  uint64_t remaining = length - first;
  uint64_t next = data_iova + first;
  if (remaining == 0) {
    *prp2 = 0;
    return;
  }
  if (remaining <= kPage) {
    *prp2 = next;
    return;
  }
  *prp2 = list_iova + list_offset;
  size_t slot = list_offset;
  while (remaining > 0) {
    uint64_t value;
    if ((list_iova + slot + 8) % kPage == 0 && remaining > kPage) {
      value = list_iova + slot + 8;  // chain to the following page of `list`
    } else {
      value = next;
      next += kPage;
      remaining -= std::min<uint64_t>(remaining, kPage);
    }
    std::memcpy(list + slot, &value, sizeof(value));
    slot += 8;
  }
}

void fill_pattern(void* p, size_t bytes, uint32_t seed) {
  auto* out = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>((i * 131 + seed * 7 + i / 251));
}

// --- Creation and registers ---

TEST(ModelCreate, RejectsBadOptions) {
  test::LogCapture log;
  auto expect_invalid = [](const ModelOpts& opts) {
    auto model = ModelController::create(opts);
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, Errc::invalid_argument);
  };
  ModelOpts opts = small_opts();
  opts.mqes = 0;
  expect_invalid(opts);
  opts = small_opts();
  opts.namespaces[0].block_size_bytes = 1024;
  expect_invalid(opts);
  opts = small_opts();
  opts.namespaces.push_back(opts.namespaces[0]);
  expect_invalid(opts);
  opts = small_opts();
  opts.namespaces[0].nsid = 0;
  expect_invalid(opts);
  opts = small_opts();
  opts.serial = std::string(21, 'S');
  expect_invalid(opts);
  opts = small_opts();
  opts.mpsmin = 2;
  opts.mpsmax = 1;
  expect_invalid(opts);
  EXPECT_TRUE(log.contains("nvme-model0"));
}

TEST(ModelRegisters, CapVersionAndAdminQueueRegisters) {
  ModelOpts opts = small_opts();
  opts.mqes = 255;
  opts.dstrd = 2;
  opts.timeout_500ms = 7;
  ModelHost host(opts);
  ModelController& model = *host.model;
  const uint64_t cap = model.read64(property::cap);
  EXPECT_EQ(spec::cap_mqes(cap), 255u);
  EXPECT_TRUE(spec::cap_cqr(cap));
  EXPECT_EQ(spec::cap_dstrd(cap), 2u);
  EXPECT_EQ(spec::cap_to(cap), 7u);
  EXPECT_EQ(spec::cap_css(cap), spec::cap_css_bit::nvm);
  EXPECT_EQ(spec::cap_mpsmin(cap), 0u);
  EXPECT_EQ(spec::cap_mpsmax(cap), 0u);
  EXPECT_FALSE(spec::cap_nssrs(cap));
  EXPECT_EQ(model.read32(property::cap), static_cast<uint32_t>(cap));
  EXPECT_EQ(model.read32(property::cap + 4), static_cast<uint32_t>(cap >> 32));
  EXPECT_EQ(model.read32(property::vs), spec::make_version(1, 4));
  EXPECT_EQ(model.read32(property::csts), 0u);
  EXPECT_EQ(host.stride(), 16u);
  EXPECT_EQ(model.bar0_size_bytes(), 0x1000u + 2 * 65 * 16);

  // ASQ / ACQ: one 64-bit write or two 32-bit halves, read back both ways.
  model.write64(reg::asq, 0x123456789000ull);
  EXPECT_EQ(model.read64(reg::asq), 0x123456789000ull);
  EXPECT_EQ(model.read32(reg::asq), 0x56789000u);
  EXPECT_EQ(model.read32(reg::asq + 4), 0x1234u);
  model.write32(reg::acq, 0xABCD0000u);
  model.write32(reg::acq + 4, 0x77u);
  EXPECT_EQ(model.read64(reg::acq), 0x77ABCD0000ull);
  model.write32(reg::aqa, pcie::make_aqa(32, 64));
  EXPECT_EQ(model.read32(reg::aqa), pcie::make_aqa(32, 64));
  // Read-only and interrupt registers ignore writes.
  model.write64(property::cap, 0);
  model.write32(property::intms, 1);
  EXPECT_EQ(model.read64(property::cap), cap);
  EXPECT_EQ(model.read32(property::intms), 0u);
}

TEST(ModelRegisters, ReadyFollowsEnableAfterTheConfiguredCstsReads) {
  ModelOpts opts = small_opts();
  opts.ready_delay_reads = 3;
  ModelHost host(opts);
  EXPECT_FALSE(host.enable(16, default_cc(), 0));  // programs and enables, reads nothing
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(spec::csts_rdy(host.csts())) << i;
  EXPECT_TRUE(spec::csts_rdy(host.csts()));
  EXPECT_EQ(host.model->read32(property::cc), default_cc());
  // Disabling: RDY lingers for the same number of reads.
  host.model->write32(property::cc, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(spec::csts_rdy(host.csts())) << i;
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_EQ(host.model->stats().resets, 1u);
}

TEST(ModelRegisters, EnableAndDisableMidTransition) {
  ModelOpts opts = small_opts();
  opts.ready_delay_reads = 2;
  ModelHost host(opts);
  ModelController& model = *host.model;
  // enabling -> disabled: CC.EN cleared before RDY was ever shown.
  EXPECT_FALSE(host.enable(16, default_cc(), 0));
  model.write32(property::cc, 0);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(spec::csts_rdy(host.csts())) << i;
  // disabled -> enabling -> ready.
  model.write32(property::cc, default_cc());
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_TRUE(spec::csts_rdy(host.csts()));
  // ready -> disabling -> enabling (CC.EN set again while RDY still lingers) -> ready.
  model.write32(property::cc, 0);
  EXPECT_TRUE(spec::csts_rdy(host.csts()));
  model.write32(property::cc, default_cc());
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_TRUE(spec::csts_rdy(host.csts()));
  EXPECT_TRUE(ok(host.admin_command(pcie::make_pcie_sqe(spec::admin_opcode::keep_alive, 0))));
  EXPECT_EQ(model.stats().resets, 2u);
}

TEST(ModelRegisters, BadEnableConfigurationSetsCfsUntilDisabled) {
  test::LogCapture log;
  ModelHost host;
  ModelController& model = *host.model;
  spec::CcFields fields;
  fields.en = true;
  fields.mps = 1;  // 8 KiB pages, beyond MPSMAX 0
  EXPECT_FALSE(host.enable(16, spec::encode_cc(fields)));
  EXPECT_TRUE(spec::csts_cfs(host.csts()));
  EXPECT_FALSE(spec::csts_rdy(host.csts()));
  EXPECT_TRUE(log.contains("CC.MPS"));
  ASSERT_TRUE(host.disable());
  EXPECT_EQ(host.csts(), 0u);

  // An admin SQ outside the device's memory: CFS and a DMA fault.
  std::vector<uint8_t> outside(2 * kPage);
  const uint64_t outside_page =
      (reinterpret_cast<uintptr_t>(outside.data()) + kPage - 1) & ~uint64_t{kPage - 1};
  model.write64(reg::asq, outside_page);
  model.write32(property::cc, default_cc());
  EXPECT_TRUE(spec::csts_cfs(host.csts()));
  EXPECT_EQ(model.stats().dma_faults, 1u);
  ASSERT_TRUE(host.disable());

  // A misaligned ASQ, and an AQA of one entry.
  env::DmaRegion queue = host.alloc(kPage);
  model.write64(reg::asq, host.iova(queue, 64));
  model.write32(property::cc, default_cc());
  EXPECT_TRUE(spec::csts_cfs(host.csts()));
  ASSERT_TRUE(host.disable());
  model.write32(reg::aqa, 0);
  model.write64(reg::asq, host.iova(queue));
  model.write32(property::cc, default_cc());
  EXPECT_TRUE(spec::csts_cfs(host.csts()));
  ASSERT_TRUE(host.disable());

  ASSERT_TRUE(host.enable());
  EXPECT_FALSE(spec::csts_cfs(host.csts()));
}

TEST(ModelRegisters, InvalidDoorbellWritesAreCountedAndIgnored) {
  test::LogCapture log;
  ModelHost host;
  ModelController& model = *host.model;
  model.write32(pcie::sq_tail_doorbell(0, 4), 1);  // before CC.EN
  EXPECT_EQ(model.stats().invalid_doorbell_writes, 1u);
  ASSERT_TRUE(host.enable(16));
  model.write32(pcie::sq_tail_doorbell(5, 4), 1);   // no such queue
  model.write32(pcie::sq_tail_doorbell(0, 4), 16);  // >= the queue size
  model.write32(pcie::cq_head_doorbell(0, 4), 3);   // past what was posted
  model.write32(reg::doorbell_base + 2, 0);         // not on the stride
  const ModelStats stats = model.stats();
  EXPECT_EQ(stats.invalid_doorbell_writes, 5u);
  EXPECT_EQ(stats.sq_tail_doorbell_writes, 0u);
  EXPECT_EQ(stats.admin_commands[spec::admin_opcode::identify], 0u);
  EXPECT_TRUE(log.contains("no such queue"));
  // The admin queue still works.
  EXPECT_TRUE(ok(host.admin_command(pcie::make_pcie_sqe(spec::admin_opcode::keep_alive, 0))));
}

// --- Identify ---

TEST(ModelIdentify, ControllerFields) {
  ModelOpts opts = small_opts();
  opts.serial = "SN123";
  opts.model_number = "Model X";
  opts.firmware = "FW9";
  opts.mdts = 6;
  opts.cntlid = 7;
  opts.sgl_supported = true;
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(kPage);
  ASSERT_TRUE(ok(host.identify(spec::cns::controller, 0, buffer)));
  const auto& id = *static_cast<const spec::IdentifyController*>(buffer.addr());
  EXPECT_EQ(id.vid, 0x1B36);
  EXPECT_EQ(spec::get_space_padded(id.sn, sizeof(id.sn)), "SN123");
  EXPECT_EQ(id.sn[19], ' ');
  EXPECT_EQ(spec::get_space_padded(id.mn, sizeof(id.mn)), "Model X");
  EXPECT_EQ(spec::get_space_padded(id.fr, sizeof(id.fr)), "FW9");
  EXPECT_EQ(id.mdts, 6);
  EXPECT_EQ(id.cntlid, 7);
  EXPECT_EQ(id.ver, spec::make_version(1, 4));
  EXPECT_EQ(id.oacs, 0);
  EXPECT_EQ(id.acl, 3);
  EXPECT_EQ(id.aerl, 3);
  EXPECT_EQ(id.sqes, 0x66);
  EXPECT_EQ(id.cqes, 0x44);
  EXPECT_EQ(id.nn, 1u);
  EXPECT_EQ(id.oncs, spec::oncs_bit::write_zeroes | spec::oncs_bit::dataset_management);
  EXPECT_TRUE(id.vwc & spec::vwc_bit::present);
  EXPECT_EQ(id.sgls & 0x3u, spec::sgls_bit::supported_no_alignment);
  EXPECT_EQ(id.cntrltype, spec::controller_type::io);
  const std::string nqn = "nqn.2014.08.org.nvmexpress:1b361af4SN123" + std::string(15, ' ') +
                          "Model X" + std::string(33, ' ');
  EXPECT_EQ(std::string(id.subnqn), nqn);
}

TEST(ModelIdentify, DataCanStartMidPageAndCrossIntoPrp2) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(2 * kPage);
  std::memset(buffer.addr(), 0xEE, 2 * kPage);
  Sqe sqe = spec::make_identify(0, spec::cns::controller);
  pcie::sqe_set_prps(sqe, host.iova(buffer, 2048), host.iova(buffer, kPage));
  ASSERT_TRUE(ok(host.admin_command(sqe)));
  const auto* bytes = static_cast<const uint8_t*>(buffer.addr());
  EXPECT_EQ(bytes[2047], 0xEE);  // untouched before PRP1
  spec::IdentifyController id;
  std::memcpy(&id, bytes + 2048, sizeof(id));
  EXPECT_EQ(id.vid, 0x1B36);
  EXPECT_EQ(id.sqes, 0x66);  // byte 512: still in PRP1's page
  EXPECT_EQ(id.nn, 1u);
  EXPECT_EQ(bytes[2048 + 4095], 0);  // vendor specific tail, in PRP2's page
  EXPECT_EQ(bytes[2048 + 4096], 0xEE);
}

TEST(ModelIdentify, NamespaceFieldsInactiveAndInvalidNsids) {
  ModelOpts opts = small_opts();
  opts.namespaces[0].nguid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  opts.namespaces[0].eui64 = {0xA, 0xB, 0xC, 0xD, 0xE, 0xF, 0x1, 0x2};
  ModelNamespace second;
  second.nsid = 3;
  second.block_size_bytes = 4096;
  second.block_count = 1000;
  second.active = false;
  opts.namespaces.push_back(second);
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(kPage);
  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_data, 1, buffer)));
  const auto& ns = *static_cast<const spec::IdentifyNamespace*>(buffer.addr());
  EXPECT_EQ(ns.nsze, kNsBlocks);
  EXPECT_EQ(ns.ncap, kNsBlocks);
  EXPECT_EQ(ns.nuse, kNsBlocks);
  EXPECT_EQ(ns.nlbaf, 0);
  EXPECT_EQ(ns.flbas, 0);
  EXPECT_EQ(ns.lbaf[0].lbads, 9);
  EXPECT_EQ(spec::namespace_block_size(ns), 512u);
  EXPECT_EQ(std::memcmp(ns.nguid, opts.namespaces[0].nguid.data(), 16), 0);
  EXPECT_EQ(std::memcmp(ns.eui64, opts.namespaces[0].eui64.data(), 8), 0);

  // NSID 3 exists but is not attached: a zeroed structure. NN is 3.
  std::memset(buffer.addr(), 0xFF, kPage);
  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_data, 3, buffer)));
  const auto* bytes = static_cast<const uint8_t*>(buffer.addr());
  EXPECT_TRUE(std::all_of(bytes, bytes + kPage, [](uint8_t b) { return b == 0; }));
  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_data, 2, buffer)));  // unconfigured <= NN

  for (uint32_t nsid : {0u, 4u, 0xFFFFFFFFu}) {
    EXPECT_TRUE(has_status(host.identify(spec::cns::namespace_data, nsid, buffer),
                           spec::sct::generic, sc::invalid_namespace_or_format))
        << nsid;
  }
  EXPECT_TRUE(has_status(host.identify(0x1F, 0, buffer), spec::sct::generic, sc::invalid_field));

  // Attach NSID 3 (hot add): now it identifies with 4 KiB blocks.
  ASSERT_TRUE(host.model->set_namespace_active(3, true).has_value());
  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_data, 3, buffer)));
  EXPECT_EQ(ns.nsze, 1000u);
  EXPECT_EQ(ns.lbaf[0].lbads, 12);
  EXPECT_FALSE(host.model->set_namespace_active(9, true).has_value());
}

TEST(ModelIdentify, ActiveNamespaceListStartsAfterTheGivenNsid) {
  ModelOpts opts = small_opts();
  for (uint32_t nsid : {7u, 3u, 12u}) {
    ModelNamespace ns;
    ns.nsid = nsid;
    ns.block_count = 64;
    ns.active = nsid != 12;
    opts.namespaces.push_back(ns);
  }
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(kPage);
  const auto& list = *static_cast<const spec::ActiveNamespaceList*>(buffer.addr());
  ASSERT_TRUE(ok(host.identify(spec::cns::active_namespace_list, 0, buffer)));
  EXPECT_EQ(list.nsid[0], 1u);
  EXPECT_EQ(list.nsid[1], 3u);
  EXPECT_EQ(list.nsid[2], 7u);
  EXPECT_EQ(list.nsid[3], 0u);
  ASSERT_TRUE(ok(host.identify(spec::cns::active_namespace_list, 3, buffer)));
  EXPECT_EQ(list.nsid[0], 7u);
  EXPECT_EQ(list.nsid[1], 0u);
  EXPECT_TRUE(has_status(host.identify(spec::cns::active_namespace_list, 0xFFFFFFFE, buffer),
                         spec::sct::generic, sc::invalid_namespace_or_format));
}

TEST(ModelIdentify, DescriptorListCarriesTheNonzeroIdentifiers) {
  ModelOpts opts = small_opts();
  opts.namespaces[0].nguid = {0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
                              0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x01};
  opts.namespaces[0].eui64 = {1, 1, 2, 3, 5, 8, 13, 21};
  ModelNamespace plain;
  plain.nsid = 2;
  plain.block_count = 8;
  opts.namespaces.push_back(plain);
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(kPage);
  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_id_descriptor_list, 1, buffer)));
  const auto* bytes = static_cast<const uint8_t*>(buffer.addr());
  // EUI64 first (type 1, length 8), then NGUID (type 2, length 16), then zeroes.
  EXPECT_EQ(bytes[0], spec::nidt::eui64);
  EXPECT_EQ(bytes[1], 8);
  EXPECT_EQ(std::memcmp(bytes + 4, opts.namespaces[0].eui64.data(), 8), 0);
  EXPECT_EQ(bytes[12], spec::nidt::nguid);
  EXPECT_EQ(bytes[13], 16);
  EXPECT_EQ(std::memcmp(bytes + 16, opts.namespaces[0].nguid.data(), 16), 0);
  EXPECT_EQ(bytes[32], 0);
  spec::NamespaceIdentifiers ids;
  ASSERT_TRUE(spec::decode_ns_id_descriptor_list(bytes, kPage, &ids));
  EXPECT_TRUE(ids.has_eui64 && ids.has_nguid && !ids.has_uuid);

  ASSERT_TRUE(ok(host.identify(spec::cns::namespace_id_descriptor_list, 2, buffer)));
  EXPECT_EQ(bytes[0], 0);  // nothing to describe
  EXPECT_TRUE(has_status(host.identify(spec::cns::namespace_id_descriptor_list, 5, buffer),
                         spec::sct::generic, sc::invalid_namespace_or_format));
}

// --- Features, queues ---

TEST(ModelFeatures, NumberOfQueuesGrantsAtMostTheMaximumUntilAQueueExists) {
  ModelOpts opts = small_opts();
  opts.io_queue_pairs_max = 16;
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  auto set_queues = [&](uint32_t sqs, uint32_t cqs) {
    return host.admin_command(spec::make_set_features(0, spec::feature::number_of_queues,
                                                      spec::encode_number_of_queues(sqs, cqs)));
  };
  Cqe cqe = set_queues(8, 4);
  ASSERT_TRUE(ok(cqe));
  EXPECT_EQ(spec::number_of_queues_sq_count(cqe.cdw0), 8u);
  EXPECT_EQ(spec::number_of_queues_cq_count(cqe.cdw0), 4u);
  cqe = host.admin_command(spec::make_get_features(0, spec::feature::number_of_queues));
  EXPECT_EQ(cqe.cdw0, spec::encode_number_of_queues(8, 4));
  cqe = set_queues(100, 100);
  EXPECT_EQ(cqe.cdw0, spec::encode_number_of_queues(16, 16));
  cqe = host.admin_command(
      spec::make_set_features(0, spec::feature::number_of_queues, 0xFFFF));  // NSQR FFFFh
  EXPECT_TRUE(has_status(cqe, spec::sct::generic, sc::invalid_field));

  ASSERT_TRUE(ok(set_queues(2, 2)));
  host.create_io_queue(1);
  EXPECT_TRUE(has_status(set_queues(4, 4), spec::sct::generic, sc::command_sequence_error));
  // QID 3 is beyond the two granted.
  env::DmaRegion cq = host.alloc(kPage);
  EXPECT_TRUE(has_status(host.create_cq(3, 16, host.iova(cq)), spec::sct::command_specific,
                         scc::invalid_queue_identifier));

  // Volatile write cache, keep alive; saving is not supported; unknown features are invalid.
  EXPECT_TRUE(
      ok(host.admin_command(spec::make_set_features(0, spec::feature::volatile_write_cache, 0))));
  EXPECT_EQ(
      host.admin_command(spec::make_get_features(0, spec::feature::volatile_write_cache)).cdw0, 0u);
  EXPECT_TRUE(has_status(
      host.admin_command(spec::make_set_features(0, spec::feature::keep_alive_timer, 5000, true)),
      spec::sct::command_specific, scc::feature_id_not_saveable));
  EXPECT_TRUE(has_status(host.admin_command(spec::make_get_features(0, spec::feature::timestamp)),
                         spec::sct::generic, sc::invalid_field));
}

TEST(ModelQueues, CreateAndDeleteErrors) {
  ModelOpts opts = small_opts();
  opts.mqes = 63;
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  env::DmaRegion cq = host.alloc(64 * sizeof(Cqe));
  env::DmaRegion sq = host.alloc(64 * sizeof(Sqe));
  const uint64_t cq_iova = host.iova(cq);
  const uint64_t sq_iova = host.iova(sq);
  const uint8_t cs = spec::sct::command_specific;
  EXPECT_TRUE(has_status(host.create_cq(0, 16, cq_iova), cs, scc::invalid_queue_identifier));
  EXPECT_TRUE(has_status(host.create_cq(65, 16, cq_iova), cs, scc::invalid_queue_identifier));
  EXPECT_TRUE(has_status(host.create_cq(1, 1, cq_iova), cs, scc::invalid_queue_size));
  EXPECT_TRUE(has_status(host.create_cq(1, 65, cq_iova), cs, scc::invalid_queue_size));
  Sqe not_contiguous = pcie::make_create_io_cq(0, 1, 16, cq_iova);
  not_contiguous.cdw11 &= ~1u;
  EXPECT_TRUE(
      has_status(host.admin_command(not_contiguous), spec::sct::generic, sc::invalid_field));
  EXPECT_TRUE(
      has_status(host.create_cq(1, 16, cq_iova + 256), spec::sct::generic, sc::prp_offset_invalid));
  // Queue memory the device cannot reach.
  std::vector<uint8_t> outside(3 * kPage);
  const uint64_t outside_page =
      (reinterpret_cast<uintptr_t>(outside.data()) + kPage - 1) & ~uint64_t{kPage - 1};
  EXPECT_TRUE(
      has_status(host.create_cq(1, 16, outside_page), spec::sct::generic, sc::invalid_field));
  EXPECT_EQ(host.model->stats().dma_faults, 1u);

  EXPECT_TRUE(ok(host.create_cq(1, 64, cq_iova)));
  EXPECT_TRUE(has_status(host.create_cq(1, 16, cq_iova), cs, scc::invalid_queue_identifier));
  EXPECT_TRUE(has_status(host.create_sq(1, 16, sq_iova, 2), cs, scc::completion_queue_invalid));
  EXPECT_TRUE(has_status(host.create_sq(1, 16, sq_iova, 0), cs, scc::completion_queue_invalid));
  EXPECT_TRUE(ok(host.create_sq(1, 64, sq_iova, 1)));
  EXPECT_TRUE(has_status(host.create_sq(1, 64, sq_iova, 1), cs, scc::invalid_queue_identifier));

  const Sqe delete_cq1 = pcie::make_delete_io_queue(spec::admin_opcode::delete_io_cq, 0, 1);
  const Sqe delete_sq1 = pcie::make_delete_io_queue(spec::admin_opcode::delete_io_sq, 0, 1);
  EXPECT_TRUE(has_status(host.admin_command(delete_cq1), cs, scc::invalid_queue_deletion));
  EXPECT_TRUE(ok(host.admin_command(delete_sq1)));
  EXPECT_TRUE(has_status(host.admin_command(delete_sq1), cs, scc::invalid_queue_identifier));
  EXPECT_TRUE(ok(host.admin_command(delete_cq1)));
  EXPECT_TRUE(has_status(host.admin_command(delete_cq1), cs, scc::invalid_queue_identifier));
  EXPECT_TRUE(has_status(
      host.admin_command(pcie::make_delete_io_queue(spec::admin_opcode::delete_io_cq, 0, 0)), cs,
      scc::invalid_queue_identifier));
}

TEST(ModelQueues, EntrySizesAreCheckedAtQueueCreation) {
  ModelHost host;
  spec::CcFields fields;
  fields.en = true;  // IOSQES / IOCQES left 0: enable works, I/O queues do not
  ASSERT_TRUE(host.enable(16, spec::encode_cc(fields)));
  env::DmaRegion cq = host.alloc(kPage);
  EXPECT_TRUE(
      has_status(host.create_cq(1, 16, host.iova(cq)), spec::sct::generic, sc::invalid_field));
}

TEST(ModelQueues, PhaseTagFlipsOnEveryWrapOfASmallQueue) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  Queue& q = host.create_io_queue(1, 4);
  for (uint32_t i = 0; i < 10; ++i) {
    const uint16_t cid = host.submit(q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1));
    const auto* slot = static_cast<const Cqe*>(q.cq.addr()) + i % 4;
    EXPECT_EQ(slot->phase(), (i / 4) % 2 == 0) << i;
    std::optional<Cqe> cqe = host.poll(q);
    ASSERT_TRUE(cqe.has_value()) << i;
    EXPECT_EQ(cqe->cid, cid);
    EXPECT_EQ(cqe->sqhd, (i + 1) % 4) << i;
    EXPECT_EQ(cqe->sqid, 1);
    EXPECT_TRUE(ok(*cqe));
  }
  EXPECT_FALSE(host.poll(q).has_value());
  EXPECT_EQ(host.model->stats().io_commands[spec::nvm_opcode::flush], 10u);
}

TEST(ModelQueues, FullCompletionQueueHoldsCompletionsUntilTheHeadAdvances) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  Queue& q = host.create_io_queue(1, 8, 4);  // 8 SQ entries, 4 CQ entries (3 usable)
  q.entries = 8;
  std::vector<uint16_t> cids;
  for (int i = 0; i < 6; ++i)
    cids.push_back(host.submit(q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1)));
  // Poll with a CQ-sized view and without ringing the head doorbell.
  Queue view;
  view.qid = 1;
  view.entries = 4;
  view.cq = std::move(q.cq);
  for (int i = 0; i < 3; ++i) {
    std::optional<Cqe> cqe = host.poll(view, false);
    ASSERT_TRUE(cqe.has_value()) << i;
    EXPECT_EQ(cqe->cid, cids[i]);
  }
  EXPECT_FALSE(host.poll(view, false).has_value());            // the 4th waits inside the model
  EXPECT_EQ(host.model->stats().completions_posted, 2u + 3u);  // create CQ + SQ, 3 flushes
  host.ring_cq(view);
  for (int i = 3; i < 6; ++i) {
    std::optional<Cqe> cqe = host.poll(view);
    ASSERT_TRUE(cqe.has_value()) << i;
    EXPECT_EQ(cqe->cid, cids[i]);
    EXPECT_EQ(cqe->phase(), i == 3);  // slot 3 is still the first lap; then the wrap
  }
  EXPECT_FALSE(host.poll(view).has_value());
  q.cq = std::move(view.cq);
}

// --- Data transfer ---

class ModelIo : public ::testing::Test {
 protected:
  void start(const ModelOpts& opts = small_opts()) {
    host = std::make_unique<ModelHost>(opts);
    ASSERT_TRUE(host->enable());
    q = &host->create_io_queue(1, 64);
  }
  void TearDown() override {
    data = env::DmaRegion{};
    list = env::DmaRegion{};
    host.reset();
  }
  Cqe io(const Sqe& sqe) { return host->execute(*q, sqe); }
  uint8_t* ns_bytes(uint32_t nsid = 1) { return host->model->namespace_data(nsid).data(); }

  // Writes `blocks` 512-byte blocks from `data` at `offset` through PRPs (list in `list`),
  // reads them back into a cleared buffer, and checks both the namespace and the buffer.
  void round_trip(uint64_t lba, uint32_t blocks, size_t offset, size_t list_offset = 0) {
    const size_t bytes = size_t{blocks} * 512;
    data = host->alloc(offset + bytes + kPage);
    list = host->alloc((bytes / kPage + 4) * 8 + list_offset + 2 * kPage);
    auto* buffer = static_cast<uint8_t*>(data.addr()) + offset;
    fill_pattern(buffer, bytes, blocks);
    uint64_t prp1 = 0;
    uint64_t prp2 = 0;
    build_prps(host->iova(data, offset), bytes, static_cast<uint8_t*>(list.addr()),
               host->iova(list), list_offset, &prp1, &prp2);
    ASSERT_TRUE(ok(io(make_rw(spec::nvm_opcode::write, 1, lba, blocks, prp1, prp2))));
    ASSERT_EQ(std::memcmp(ns_bytes() + lba * 512, buffer, bytes), 0);
    std::vector<uint8_t> expected(buffer, buffer + bytes);
    std::memset(buffer, 0, bytes);
    ASSERT_TRUE(ok(io(make_rw(spec::nvm_opcode::read, 1, lba, blocks, prp1, prp2))));
    ASSERT_EQ(std::memcmp(buffer, expected.data(), bytes), 0);
  }

  std::unique_ptr<ModelHost> host;
  Queue* q = nullptr;
  env::DmaRegion data;
  env::DmaRegion list;
};

TEST_F(ModelIo, OneBlockInPrp1) {
  start();
  round_trip(5, 1, 0);
  round_trip(6, 1, 1024);  // an offset inside the page
  const ModelStats stats = host->model->stats();
  EXPECT_EQ(stats.written_bytes, 1024u);
  EXPECT_EQ(stats.read_bytes, 1024u);
  EXPECT_EQ(stats.io_commands[spec::nvm_opcode::write], 2u);
  EXPECT_EQ(stats.io_commands[spec::nvm_opcode::read], 2u);
}

TEST_F(ModelIo, EightBlocksOverPrp1AndPrp2) {
  start();
  round_trip(100, 8, 0);     // exactly one page: PRP2 unused
  round_trip(200, 8, 2048);  // crosses into PRP2's page
  round_trip(300, 16, 512);  // two pages and a bit: a list of two entries
}

TEST_F(ModelIo, SixtyFourKibThroughAPrpList) {
  start();
  round_trip(1000, 128, 0);
  round_trip(2000, 128, 4, 3 * 8);  // dword-aligned PRP1 offset, list with an offset
}

TEST_F(ModelIo, BeyondMdtsIsAnInvalidField) {
  start();  // MDTS 5: 128 KiB
  round_trip(0, 256, 0);
  data = host->alloc(2 << 20);
  Sqe sqe = make_rw(spec::nvm_opcode::write, 1, 0, 257, host->iova(data), 0);
  EXPECT_TRUE(has_status(io(sqe), spec::sct::generic, sc::invalid_field));
  sqe = make_rw(spec::nvm_opcode::read, 1, 0, 4096, host->iova(data), 0);  // 2 MiB
  EXPECT_TRUE(has_status(io(sqe), spec::sct::generic, sc::invalid_field));
}

TEST_F(ModelIo, PrpListsChainAcrossListPages) {
  ModelOpts opts = small_opts();
  opts.mdts = 0;  // no limit
  start(opts);
  // 600 pages: 599 list entries, more than one list page holds, so the last entry chains.
  round_trip(0, 600 * 8, 0);
  // A list that starts 8 entries before the end of its page chains right away.
  round_trip(9000, 600 * 8 + 3, 100, kPage - 64);
}

TEST_F(ModelIo, PrpOffsetRules) {
  start();
  data = host->alloc(16 * kPage);
  list = host->alloc(kPage);
  auto* entries = static_cast<uint64_t*>(list.addr());
  const uint64_t base = host->iova(data);
  auto expect_offset_invalid = [&](const Sqe& sqe, const char* what) {
    EXPECT_TRUE(has_status(io(sqe), spec::sct::generic, sc::prp_offset_invalid)) << what;
  };
  expect_offset_invalid(make_rw(spec::nvm_opcode::write, 1, 0, 1, base + 2),
                        "PRP1 not dword aligned");
  expect_offset_invalid(make_rw(spec::nvm_opcode::write, 1, 0, 8, base + 512, base + kPage + 8),
                        "PRP2 data pointer with an offset");
  expect_offset_invalid(make_rw(spec::nvm_opcode::write, 1, 0, 24, base, host->iova(list) + 4),
                        "list pointer not qword aligned");
  entries[0] = base + kPage;
  entries[1] = base + 2 * kPage + 512;
  expect_offset_invalid(make_rw(spec::nvm_opcode::write, 1, 0, 24, base, host->iova(list)),
                        "list entry with an offset");
  EXPECT_EQ(host->model->stats().written_bytes, 0u);
  // Nothing was written by the failed commands.
  const uint8_t* bytes = ns_bytes();
  EXPECT_TRUE(std::all_of(bytes, bytes + 24 * 512, [](uint8_t b) { return b == 0; }));
}

TEST_F(ModelIo, MemoryOutsideTheDeviceIsADataTransferError) {
  test::LogCapture log;
  start();
  data = host->alloc(4 * kPage);
  list = host->alloc(kPage);
  std::vector<uint8_t> outside(8 * kPage, 0x5A);
  const uint64_t outside_page =
      (reinterpret_cast<uintptr_t>(outside.data()) + kPage - 1) & ~uint64_t{kPage - 1};
  const uint8_t generic = spec::sct::generic;
  EXPECT_TRUE(has_status(io(make_rw(spec::nvm_opcode::write, 1, 0, 1, outside_page)), generic,
                         sc::data_transfer_error));
  EXPECT_TRUE(
      has_status(io(make_rw(spec::nvm_opcode::write, 1, 0, 24, host->iova(data), outside_page)),
                 generic, sc::data_transfer_error));  // PRP list outside
  auto* entries = static_cast<uint64_t*>(list.addr());
  entries[0] = host->iova(data, kPage);
  entries[1] = outside_page;
  EXPECT_TRUE(
      has_status(io(make_rw(spec::nvm_opcode::read, 1, 0, 24, host->iova(data), host->iova(list))),
                 generic, sc::data_transfer_error));  // a list entry outside
  EXPECT_EQ(host->model->stats().dma_faults, 3u);
  EXPECT_TRUE(log.contains("DMA fault"));
  EXPECT_EQ(host->model->dma_address(outside.data(), 1), env::kBadIova);

  // allow_dma maps the range (an IOMMU entry): the same command now succeeds.
  ASSERT_TRUE(host->model->allow_dma(outside.data(), outside.size()).has_value());
  EXPECT_EQ(host->model->dma_address(outside.data(), 16),
            reinterpret_cast<uintptr_t>(outside.data()));
  ASSERT_TRUE(ok(io(make_rw(spec::nvm_opcode::write, 1, 0, 1, outside_page))));
  EXPECT_EQ(ns_bytes()[0], 0x5A);
  host->model->revoke_dma(outside.data());
  EXPECT_TRUE(has_status(io(make_rw(spec::nvm_opcode::write, 1, 0, 1, outside_page)), generic,
                         sc::data_transfer_error));
}

TEST_F(ModelIo, LbaRangeNamespaceAndOpcodeErrors) {
  start();
  data = host->alloc(kPage);
  const uint64_t buffer = host->iova(data);
  EXPECT_TRUE(has_status(io(make_rw(spec::nvm_opcode::read, 1, kNsBlocks - 1, 2, buffer)),
                         spec::sct::generic, sc::lba_out_of_range));
  EXPECT_TRUE(ok(io(make_rw(spec::nvm_opcode::read, 1, kNsBlocks - 1, 1, buffer))));
  EXPECT_TRUE(has_status(io(make_rw(spec::nvm_opcode::read, 1, ~uint64_t{0}, 1, buffer)),
                         spec::sct::generic, sc::lba_out_of_range));
  for (uint32_t nsid : {0u, 2u, 0xFFFFFFFFu}) {
    EXPECT_TRUE(has_status(io(make_rw(spec::nvm_opcode::read, nsid, 0, 1, buffer)),
                           spec::sct::generic, sc::invalid_namespace_or_format))
        << nsid;
  }
  EXPECT_TRUE(ok(io(pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 0xFFFFFFFF))));
  EXPECT_TRUE(has_status(io(pcie::make_pcie_sqe(spec::nvm_opcode::compare, 0, 1)),
                         spec::sct::generic, sc::invalid_opcode));
  EXPECT_TRUE(has_status(host->admin_command(pcie::make_pcie_sqe(0xC0, 0)), spec::sct::generic,
                         sc::invalid_opcode));
  Sqe sgl = make_rw(spec::nvm_opcode::read, 1, 0, 1, buffer);
  sgl.set_psdt(spec::psdt::sgl_mptr_contiguous);  // SGLs not supported by default
  EXPECT_TRUE(has_status(io(sgl), spec::sct::generic, sc::invalid_field));
}

TEST_F(ModelIo, WriteZeroesAndDeallocateZeroTheirRanges) {
  start();
  std::vector<uint8_t> pattern(64 * 512);
  fill_pattern(pattern.data(), pattern.size(), 3);
  std::memcpy(ns_bytes(), pattern.data(), pattern.size());
  Sqe zeroes = pcie::make_pcie_sqe(spec::nvm_opcode::write_zeroes, 0, 1);
  spec::rw_set_range(zeroes, 4, 4);
  ASSERT_TRUE(ok(io(zeroes)));
  spec::rw_set_range(zeroes, kNsBlocks - 1, 2);
  EXPECT_TRUE(has_status(io(zeroes), spec::sct::generic, sc::lba_out_of_range));

  data = host->alloc(kPage);
  auto* ranges = static_cast<spec::DsmRange*>(data.addr());
  ranges[0] = spec::DsmRange{0, 3, 20};
  ranges[1] = spec::DsmRange{0, 1, 40};
  Sqe dsm = pcie::make_pcie_sqe(spec::nvm_opcode::dataset_management, 0, 1);
  pcie::sqe_set_prps(dsm, host->iova(data), 0);
  dsm.cdw10 = 1;             // two ranges (0's based)
  ASSERT_TRUE(ok(io(dsm)));  // no AD bit: hints only, nothing changes
  EXPECT_EQ(std::memcmp(ns_bytes() + 20 * 512, pattern.data() + 20 * 512, 512), 0);
  dsm.cdw11 = 1u << 2;  // AD: deallocate
  ASSERT_TRUE(ok(io(dsm)));
  for (uint32_t block = 0; block < 64; ++block) {
    const bool zeroed = (block >= 4 && block < 8) || (block >= 20 && block < 23) || block == 40;
    const uint8_t* at = ns_bytes() + block * 512;
    if (zeroed) {
      EXPECT_TRUE(std::all_of(at, at + 512, [](uint8_t b) { return b == 0; })) << block;
    } else {
      EXPECT_EQ(std::memcmp(at, pattern.data() + block * 512, 512), 0) << block;
    }
  }
  ranges[1] = spec::DsmRange{0, 2, kNsBlocks - 1};  // the second range runs past the end
  ranges[0] = spec::DsmRange{0, 1, 0};
  EXPECT_TRUE(has_status(io(dsm), spec::sct::generic, sc::lba_out_of_range));
  EXPECT_EQ(ns_bytes()[0], pattern[0]);  // all or nothing
}

TEST_F(ModelIo, DeallocatingWholeFourKibBlocksReadsBackZeroes) {
  ModelOpts opts = small_opts();
  opts.namespaces[0].block_size_bytes = 4096;
  opts.namespaces[0].block_count = 256;
  start(opts);
  std::memset(ns_bytes(), 0xAB, 256 * 4096);
  data = host->alloc(kPage);
  auto* ranges = static_cast<spec::DsmRange*>(data.addr());
  ranges[0] = spec::DsmRange{0, 100, 10};
  Sqe dsm = pcie::make_pcie_sqe(spec::nvm_opcode::dataset_management, 0, 1);
  pcie::sqe_set_prps(dsm, host->iova(data), 0);
  dsm.cdw11 = 1u << 2;
  ASSERT_TRUE(ok(io(dsm)));
  const uint8_t* bytes = ns_bytes();
  EXPECT_EQ(bytes[10 * 4096 - 1], 0xAB);
  EXPECT_TRUE(std::all_of(bytes + 10 * 4096, bytes + 110 * 4096, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(bytes[110 * 4096], 0xAB);
  // One 4 KiB block round trip on this namespace.
  list = host->alloc(kPage);
  std::memset(list.addr(), 0x42, kPage);
  ASSERT_TRUE(ok(io(make_rw(spec::nvm_opcode::write, 1, 255, 1, host->iova(list)))));
  EXPECT_EQ(bytes[256 * 4096 - 1], 0x42);
}

TEST_F(ModelIo, InjectedFailuresCompleteWithTheirStatus) {
  start();
  data = host->alloc(kPage);
  host->model->fail_next(
      spec::nvm_opcode::read,
      spec::make_status(spec::sct::media_data_integrity, spec::sc_media::unrecovered_read_error),
      2);
  const Sqe read = make_rw(spec::nvm_opcode::read, 1, 0, 1, host->iova(data));
  EXPECT_TRUE(has_status(io(read), spec::sct::media_data_integrity,
                         spec::sc_media::unrecovered_read_error));
  EXPECT_TRUE(has_status(io(read), spec::sct::media_data_integrity,
                         spec::sc_media::unrecovered_read_error));
  EXPECT_TRUE(ok(io(read)));
  // Opcode 02h on the admin queue is Get Log Page: the I/O injection does not touch it.
  host->model->fail_next(spec::admin_opcode::get_log_page, spec::generic_status(sc::internal_error),
                         1, true);
  Sqe log = spec::make_get_log_page(0, spec::log_page::smart_health, 512);
  pcie::sqe_set_prps(log, host->iova(data), 0);
  EXPECT_TRUE(ok(io(read)));
  EXPECT_TRUE(has_status(host->admin_command(log), spec::sct::generic, sc::internal_error));
  EXPECT_TRUE(ok(host->admin_command(log)));
}

// --- SGLs ---

class ModelSgl : public ModelIo {
 protected:
  void SetUp() override {
    ModelOpts opts = small_opts();
    opts.sgl_supported = true;
    start(opts);
    data = host->alloc(4 * kPage);
    list = host->alloc(kPage);
    fill_pattern(data.addr(), 4 * kPage, 9);
  }
  Sqe sgl_rw(uint8_t opcode, uint64_t lba, uint32_t blocks, const spec::SglDescriptor& sgl1) {
    Sqe sqe = pcie::make_pcie_sqe(opcode, 0, 1);
    spec::rw_set_range(sqe, lba, blocks);
    sqe.set_psdt(spec::psdt::sgl_mptr_contiguous);
    sqe.sgl1 = sgl1;
    return sqe;
  }
  spec::SglDescriptor* descriptors() { return static_cast<spec::SglDescriptor*>(list.addr()); }
  const uint8_t* source(size_t offset) { return static_cast<const uint8_t*>(data.addr()) + offset; }
};

TEST_F(ModelSgl, DataBlockInTheCommand) {
  ASSERT_TRUE(ok(io(
      sgl_rw(spec::nvm_opcode::write, 0, 2, spec::make_data_block(host->iova(data, 100), 1024)))));
  EXPECT_EQ(std::memcmp(ns_bytes(), source(100), 1024), 0);
  EXPECT_TRUE(has_status(
      io(sgl_rw(spec::nvm_opcode::write, 0, 2, spec::make_data_block(host->iova(data), 1000))),
      spec::sct::generic, sc::data_sgl_length_invalid));
  EXPECT_TRUE(has_status(io(sgl_rw(spec::nvm_opcode::write, 0, 1,
                                   spec::make_keyed_data_block(host->iova(data), 512, 1, false))),
                         spec::sct::generic, sc::sgl_descriptor_type_invalid));
}

TEST_F(ModelSgl, LastSegmentListOfDataBlocks) {
  descriptors()[0] = spec::make_data_block(host->iova(data, 0), 1024);
  descriptors()[1] = spec::make_data_block(host->iova(data, 8192), 512);
  descriptors()[2] = spec::make_data_block(host->iova(data, 4000), 2560);  // crosses a page
  const auto sgl1 = spec::make_last_segment(host->iova(list), 48, spec::sgl_subtype::address);
  ASSERT_TRUE(ok(io(sgl_rw(spec::nvm_opcode::write, 8, 8, sgl1))));
  EXPECT_EQ(std::memcmp(ns_bytes() + 8 * 512, source(0), 1024), 0);
  EXPECT_EQ(std::memcmp(ns_bytes() + 8 * 512 + 1024, source(8192), 512), 0);
  EXPECT_EQ(std::memcmp(ns_bytes() + 8 * 512 + 1536, source(4000), 2560), 0);
  // Read back into a cleared buffer through the same list.
  std::vector<uint8_t> expected(ns_bytes() + 8 * 512, ns_bytes() + 16 * 512);
  std::memset(data.addr(), 0, 4 * kPage);
  ASSERT_TRUE(ok(io(sgl_rw(spec::nvm_opcode::read, 8, 8, sgl1))));
  EXPECT_EQ(std::memcmp(source(0), expected.data(), 1024), 0);
  EXPECT_EQ(std::memcmp(source(4000), expected.data() + 1536, 2560), 0);
  // A Segment descriptor inside a Last Segment list is invalid.
  descriptors()[1] = spec::make_segment(host->iova(list), 16, spec::sgl_subtype::address);
  EXPECT_TRUE(has_status(io(sgl_rw(spec::nvm_opcode::write, 8, 8, sgl1)), spec::sct::generic,
                         sc::invalid_sgl_segment_descriptor));
}

TEST_F(ModelSgl, SegmentsChainToALastSegment) {
  spec::SglDescriptor* d = descriptors();
  d[0] = spec::make_data_block(host->iova(data, 0), 2048);
  d[1] = spec::make_last_segment(host->iova(list, 256), 32, spec::sgl_subtype::address);
  d[16] = spec::make_data_block(host->iova(data, 2 * kPage), 1024);
  d[17] = spec::make_data_block(host->iova(data, 3 * kPage), 1024);
  const auto sgl1 = spec::make_segment(host->iova(list), 32, spec::sgl_subtype::address);
  ASSERT_TRUE(ok(io(sgl_rw(spec::nvm_opcode::write, 0, 8, sgl1))));
  EXPECT_EQ(std::memcmp(ns_bytes(), source(0), 2048), 0);
  EXPECT_EQ(std::memcmp(ns_bytes() + 2048, source(2 * kPage), 1024), 0);
  EXPECT_EQ(std::memcmp(ns_bytes() + 3072, source(3 * kPage), 1024), 0);
  // The SGL describes less than the transfer.
  EXPECT_TRUE(has_status(io(sgl_rw(spec::nvm_opcode::write, 0, 9, sgl1)), spec::sct::generic,
                         sc::data_sgl_length_invalid));
  // A segment list outside DMA memory.
  std::vector<spec::SglDescriptor> outside(4);
  const auto bad = spec::make_last_segment(reinterpret_cast<uintptr_t>(outside.data()), 16,
                                           spec::sgl_subtype::address);
  EXPECT_TRUE(has_status(io(sgl_rw(spec::nvm_opcode::write, 0, 1, bad)), spec::sct::generic,
                         sc::data_transfer_error));
}

// --- Fault injection, abort, reset ---

TEST_F(ModelIo, AbortCompletesAStalledCommand) {
  start();
  data = host->alloc(kPage);
  host->model->stall(spec::nvm_opcode::read, false, 1);
  const uint16_t cid = host->submit(*q, make_rw(spec::nvm_opcode::read, 1, 0, 1, host->iova(data)));
  EXPECT_FALSE(host->poll(*q).has_value());
  EXPECT_EQ(host->model->stalled_count(), 1u);
  Cqe abort = host->admin_command(pcie::make_abort(0, 1, cid));
  ASSERT_TRUE(ok(abort));
  EXPECT_EQ(abort.cdw0 & 1u, 0u);  // aborted
  std::optional<Cqe> aborted = host->poll(*q);
  ASSERT_TRUE(aborted.has_value());
  EXPECT_EQ(aborted->cid, cid);
  EXPECT_TRUE(has_status(*aborted, spec::sct::generic, sc::abort_requested));
  // Nothing left to abort, and the next read is not stalled.
  EXPECT_EQ(host->admin_command(pcie::make_abort(0, 1, cid)).cdw0 & 1u, 1u);
  EXPECT_TRUE(ok(io(make_rw(spec::nvm_opcode::read, 1, 0, 1, host->iova(data)))));
}

TEST_F(ModelIo, ReleasedStallsCompleteNormallyInOrder) {
  start();
  data = host->alloc(kPage);
  std::memset(ns_bytes(), 0x77, 512);
  host->model->stall(spec::nvm_opcode::read, false, 2);
  const uint16_t first =
      host->submit(*q, make_rw(spec::nvm_opcode::read, 1, 0, 1, host->iova(data)));
  const uint16_t second =
      host->submit(*q, make_rw(spec::nvm_opcode::read, 1, 0, 1, host->iova(data, 512)));
  const uint16_t flush = host->submit(*q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1));
  std::optional<Cqe> cqe = host->poll(*q);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, flush);  // overtakes the stalled reads
  EXPECT_EQ(host->model->release_stalled(), 2u);
  cqe = host->poll(*q);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, first);
  EXPECT_EQ(cqe->sqhd, 3);  // the SQ head at posting time
  cqe = host->poll(*q);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, second);
  EXPECT_EQ(static_cast<uint8_t*>(data.addr())[511], 0x77);
  EXPECT_EQ(static_cast<uint8_t*>(data.addr())[1023], 0x77);
}

TEST_F(ModelIo, DeletingAnSqAbortsItsStalledCommands) {
  start();
  host->model->stall(spec::nvm_opcode::flush, false, 1);
  const uint16_t cid = host->submit(*q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1));
  ASSERT_TRUE(
      ok(host->admin_command(pcie::make_delete_io_queue(spec::admin_opcode::delete_io_sq, 0, 1))));
  std::optional<Cqe> cqe = host->poll(*q);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, cid);
  EXPECT_TRUE(has_status(*cqe, spec::sct::generic, sc::aborted_sq_deletion));
  EXPECT_EQ(host->model->stalled_count(), 0u);
  EXPECT_TRUE(
      ok(host->admin_command(pcie::make_delete_io_queue(spec::admin_opcode::delete_io_cq, 0, 1))));
}

TEST_F(ModelIo, ResetDropsStalledCommandsAndQueues) {
  start();
  data = host->alloc(kPage);
  fill_pattern(data.addr(), kPage, 1);
  host->model->stall(spec::nvm_opcode::write, false, 2);
  host->submit(*q, make_rw(spec::nvm_opcode::write, 1, 0, 1, host->iova(data)));
  host->submit(*q, make_rw(spec::nvm_opcode::write, 1, 1, 1, host->iova(data)));
  env::DmaRegion old_cq = std::move(q->cq);
  env::DmaRegion old_sq = std::move(q->sq);
  ASSERT_TRUE(host->disable());
  EXPECT_EQ(host->model->stalled_count(), 0u);
  EXPECT_EQ(host->model->release_stalled(), 0u);
  ASSERT_TRUE(host->enable());
  const auto* old_bytes = static_cast<const uint8_t*>(old_cq.addr());
  EXPECT_TRUE(
      std::all_of(old_bytes, old_bytes + 64 * sizeof(Cqe), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(ns_bytes()[0], 0);  // the writes never ran
  EXPECT_EQ(host->model->stats().resets, 1u);
  // The I/O queue is gone: its doorbell is ignored until it is created again.
  host->model->write32(pcie::sq_tail_doorbell(1, 4), 1);
  EXPECT_EQ(host->model->stats().invalid_doorbell_writes, 1u);
  q = &host->create_io_queue(1, 64);
  EXPECT_TRUE(ok(io(make_rw(spec::nvm_opcode::write, 1, 0, 1, host->iova(data)))));
}

TEST_F(ModelIo, FatalStatusStopsCompletionsUntilReset) {
  start();
  host->model->inject_fatal();
  const uint32_t csts = host->csts();
  EXPECT_TRUE(spec::csts_cfs(csts));
  EXPECT_TRUE(spec::csts_rdy(csts));
  host->submit(*q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1));
  EXPECT_FALSE(host->poll(*q).has_value());
  host->submit(host->admin, pcie::make_pcie_sqe(spec::admin_opcode::keep_alive, 0));
  EXPECT_FALSE(host->poll(host->admin).has_value());
  EXPECT_EQ(host->model->stats().io_commands[spec::nvm_opcode::flush], 0u);
  ASSERT_TRUE(host->disable());
  EXPECT_FALSE(spec::csts_cfs(host->csts()));
  ASSERT_TRUE(host->enable());
  q = &host->create_io_queue(1, 64);
  EXPECT_TRUE(ok(io(pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1))));
}

TEST_F(ModelIo, SurpriseRemovalReadsAllOnes) {
  start();
  host->model->remove();
  EXPECT_TRUE(host->model->removed());
  EXPECT_EQ(host->model->read32(property::csts), 0xFFFFFFFFu);
  EXPECT_EQ(host->model->read32(property::vs), 0xFFFFFFFFu);
  EXPECT_EQ(host->model->read64(property::cap), ~uint64_t{0});
  const ModelStats before = host->model->stats();
  host->model->write32(pcie::sq_tail_doorbell(1, 4), 1);
  host->model->write32(property::cc, 0);
  host->model->raise_namespace_changed(1);
  const ModelStats after = host->model->stats();
  EXPECT_EQ(after.sq_tail_doorbell_writes, before.sq_tail_doorbell_writes);
  EXPECT_EQ(after.resets, 0u);
  EXPECT_EQ(after.completions_posted, before.completions_posted);
}

TEST(ModelShutdown, ShstWalksOccurringThenComplete) {
  ModelOpts opts = small_opts();
  opts.shutdown_delay_reads = 2;
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  spec::CcFields fields;
  fields.en = true;
  fields.iosqes = 6;
  fields.iocqes = 4;
  fields.shn = spec::shutdown_notification::normal;
  host.model->write32(property::cc, spec::encode_cc(fields));
  EXPECT_EQ(spec::csts_shst(host.csts()), spec::shutdown_status::occurring);
  EXPECT_EQ(spec::csts_shst(host.csts()), spec::shutdown_status::occurring);
  uint32_t csts = host.csts();
  EXPECT_EQ(spec::csts_shst(csts), spec::shutdown_status::complete);
  EXPECT_TRUE(spec::csts_rdy(csts));
  EXPECT_EQ(spec::csts_shst(host.csts()), spec::shutdown_status::complete);
  // No more commands after a shutdown; a reset starts over.
  host.submit(host.admin, pcie::make_pcie_sqe(spec::admin_opcode::keep_alive, 0));
  EXPECT_FALSE(host.poll(host.admin).has_value());
  ASSERT_TRUE(host.disable());
  EXPECT_EQ(spec::csts_shst(host.csts()), spec::shutdown_status::normal);
  ASSERT_TRUE(host.enable());
  EXPECT_TRUE(ok(host.admin_command(pcie::make_pcie_sqe(spec::admin_opcode::keep_alive, 0))));
}

TEST(ModelShutdown, NssrResetsWhenSupported) {
  ModelOpts opts = small_opts();
  opts.nssr_supported = true;
  ModelHost host(opts);
  ASSERT_TRUE(host.enable());
  EXPECT_TRUE(spec::cap_nssrs(host.model->read64(property::cap)));
  host.model->write32(property::nssr, 0x12345678);  // not "NVMe": ignored
  EXPECT_TRUE(spec::csts_rdy(host.csts()));
  host.model->write32(property::nssr, spec::nssr_reset_value);
  const uint32_t csts = host.csts();
  EXPECT_FALSE(spec::csts_rdy(csts));
  EXPECT_TRUE(spec::csts_nssro(csts));
  EXPECT_EQ(host.model->read32(property::cc), 0u);
  host.model->write32(property::csts, 1u << 4);  // RW1C
  EXPECT_FALSE(spec::csts_nssro(host.csts()));
}

// --- Asynchronous events and log pages ---

TEST(ModelEvents, NamespaceChangeCompletesAnAerAndFillsLogPage04) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(kPage);
  const auto& changed = *static_cast<const spec::ChangedNamespaceList*>(buffer.addr());
  auto read_changed = [&](bool rae = false) {
    Sqe sqe = spec::make_get_log_page(0, spec::log_page::changed_namespace_list, kPage, 0,
                                      spec::nsid_all, 0, rae);
    pcie::sqe_set_prps(sqe, host.iova(buffer), 0);
    return host.admin_command(sqe);
  };
  const uint32_t notice = spec::encode_async_event(
      spec::async_event_type::notice, spec::async_event_notice::namespace_attribute_changed,
      spec::log_page::changed_namespace_list);
  const Sqe aer = pcie::make_pcie_sqe(spec::admin_opcode::async_event_request, 0);

  const uint16_t first = host.submit(host.admin, aer);
  EXPECT_FALSE(host.poll(host.admin).has_value());
  host.model->raise_namespace_changed(1);
  std::optional<Cqe> cqe = host.poll(host.admin);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, first);
  EXPECT_TRUE(ok(*cqe));
  EXPECT_EQ(cqe->cdw0, notice);

  // Masked until the log is read: a second change waits in the log.
  const uint16_t second = host.submit(host.admin, aer);
  host.model->raise_namespace_changed(2);
  EXPECT_FALSE(host.poll(host.admin).has_value());
  ASSERT_TRUE(ok(read_changed(true)));  // RAE: the mask stays
  EXPECT_EQ(changed.nsid[0], 1u);
  EXPECT_EQ(changed.nsid[1], 2u);
  EXPECT_EQ(changed.nsid[2], 0u);
  ASSERT_TRUE(ok(read_changed()));  // clears the log and re-arms the notice
  ASSERT_TRUE(ok(read_changed()));
  EXPECT_EQ(changed.nsid[0], 0u);
  host.model->raise_namespace_changed(1);
  cqe = host.poll(host.admin);
  ASSERT_TRUE(cqe.has_value());
  EXPECT_EQ(cqe->cid, second);
  ASSERT_TRUE(ok(read_changed()));

  // An event raised with no AER outstanding completes the next AER at once.
  host.model->raise_namespace_changed(1);
  EXPECT_EQ(host.execute(host.admin, aer).cdw0, notice);
  ASSERT_TRUE(ok(read_changed()));

  // Four AERs may be outstanding, the fifth is refused.
  for (int i = 0; i < 4; ++i) host.submit(host.admin, aer);
  EXPECT_TRUE(has_status(host.execute(host.admin, aer), spec::sct::command_specific,
                         scc::async_event_request_limit_exceeded));
  // A reset drops the outstanding ones silently.
  ASSERT_TRUE(host.disable());
  ASSERT_TRUE(host.enable());
  host.model->raise_namespace_changed(1);
  EXPECT_FALSE(host.poll(host.admin).has_value());
}

TEST(ModelEvents, LogPagesAndDetachedNamespaces) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  env::DmaRegion buffer = host.alloc(2 * kPage);
  std::memset(buffer.addr(), 0xCC, 2 * kPage);
  auto log_page = [&](uint8_t lid, uint64_t length, uint32_t offset = 0) {
    Sqe sqe = spec::make_get_log_page(0, lid, length);
    sqe.cdw12 = offset;  // LPOL, set by hand: make_get_log_page asserts it is dword-aligned
    pcie::sqe_set_prps(sqe, host.iova(buffer), host.iova(buffer, kPage));
    return host.admin_command(sqe);
  };
  ASSERT_TRUE(ok(log_page(spec::log_page::smart_health, 512)));
  const auto& smart = *static_cast<const spec::SmartHealthLog*>(buffer.addr());
  EXPECT_EQ(smart.critical_warning, 0);
  EXPECT_GT(smart.composite_temperature_kelvin(), 273);
  EXPECT_EQ(static_cast<const uint8_t*>(buffer.addr())[512], 0xCC);
  ASSERT_TRUE(ok(log_page(spec::log_page::error_information, 8192)));  // zero-filled past 64 B
  const auto* bytes = static_cast<const uint8_t*>(buffer.addr());
  EXPECT_TRUE(std::all_of(bytes, bytes + 8192, [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(has_status(log_page(0x42, 512), spec::sct::command_specific, scc::invalid_log_page));
  EXPECT_TRUE(has_status(log_page(spec::log_page::smart_health, 4, 2), spec::sct::generic,
                         sc::invalid_field));
  // Admin data through an SGL is refused.
  Sqe sgl = spec::make_get_log_page(0, spec::log_page::smart_health, 512);
  EXPECT_TRUE(has_status(host.admin_command(sgl), spec::sct::generic, sc::invalid_field));

  // Hot removal of the namespace: I/O and Identify see it gone, the log names it.
  Queue& q = host.create_io_queue(1, 16);
  ASSERT_TRUE(host.model->set_namespace_active(1, false).has_value());
  EXPECT_TRUE(has_status(host.execute(q, pcie::make_pcie_sqe(spec::nvm_opcode::flush, 0, 1)),
                         spec::sct::generic, sc::invalid_namespace_or_format));
  ASSERT_TRUE(ok(log_page(spec::log_page::changed_namespace_list, kPage)));
  EXPECT_EQ(static_cast<const uint32_t*>(buffer.addr())[0], 1u);
  ASSERT_TRUE(ok(host.identify(spec::cns::active_namespace_list, 0, buffer)));
  EXPECT_EQ(static_cast<const uint32_t*>(buffer.addr())[0], 0u);
}

// --- Threads ---

TEST(ModelThreads, QueuesDrivenFromSeveralThreadsAtOnce) {
  ModelHost host;
  ASSERT_TRUE(host.enable());
  constexpr int kThreads = 2;
  constexpr int kIterations = 300;
  std::vector<Queue*> queues;
  std::vector<env::DmaRegion> buffers;
  for (int t = 0; t < kThreads; ++t) {
    queues.push_back(&host.create_io_queue(static_cast<uint16_t>(t + 1), 8));
    buffers.push_back(host.alloc(2 * kPage));
  }
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto* out = static_cast<uint8_t*>(buffers[t].addr());
      uint8_t* in = out + kPage;
      for (int i = 0; i < kIterations; ++i) {
        const uint64_t lba = static_cast<uint64_t>(t) * 1000 + (i % 100) * 8;
        fill_pattern(out, kPage, static_cast<uint32_t>(i + t));
        Cqe w = host.execute(*queues[t],
                             make_rw(spec::nvm_opcode::write, 1, lba, 8, host.iova(buffers[t])));
        Cqe r = host.execute(
            *queues[t], make_rw(spec::nvm_opcode::read, 1, lba, 8, host.iova(buffers[t], kPage)));
        if (!w.decoded_status().is_success() || !r.decoded_status().is_success() ||
            std::memcmp(out, in, kPage) != 0) {
          failures.fetch_add(1);
        }
      }
    });
  }
  std::thread admin([&] {
    while (!done.load()) {
      Cqe cqe = host.admin_command(spec::make_get_features(0, spec::feature::number_of_queues));
      if (!cqe.decoded_status().is_success()) failures.fetch_add(1);
    }
  });
  for (std::thread& thread : threads) thread.join();
  done.store(true);
  admin.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(host.model->stats().io_commands[spec::nvm_opcode::write],
            uint64_t{kThreads} * kIterations);
}

}  // namespace
}  // namespace nvmf::nvme_pcie::model
