// Fuzz target: Fabrics commands from a host that has not connected yet: Connect (its SQE
// fields and its 1024-byte data: SUBNQN, HOSTNQN, HOSTID, CNTLID), then whatever follows on
// the queues it made (Property Get/Set, Disconnect, a second Connect, I/O Connects to the
// controller it got), through the target core's entry point (target::execute) with a fake
// transport (target_harness.h). The target has the discovery subsystem and one NVM subsystem
// (kSubsystemNqn, NS 1 malloc and NS 2 null) that lists kHostNqn and allows any host when
// the first input bit says so; one queue pair waits on reactor 0 with 32 slots.
//
// Input: [flags u8] then records (TargetHarness::run_records): commands, polls, clock steps,
// queues made and destroyed.
// Properties (the harness's): one request_complete per command with its CID and the queue's
// SQID; qpair_disconnect at most once per queue; every queue can be destroyed and every
// controller goes with its queues; no sanitizer report; no stuck command or livelock.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "target_harness.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nvmf::fuzz::Input in(data, size);
  const uint8_t flags = in.byte();
  nvmf::fuzz::TargetHarness harness;
  harness.add_default_subsystem((flags & 1) != 0);
  harness.new_queue(0, 32);
  harness.run_records(in);
  return 0;
}
