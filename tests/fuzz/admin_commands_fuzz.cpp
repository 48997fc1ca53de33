// Fuzz target: every admin command's parameters (Identify CNS/NSID, Get Log Page LID, offset,
// length, RAE, Get/Set Features FID and values, Asynchronous Event Requests, Keep Alive,
// Abort, unknown opcodes), Fabrics Property Get/Set on the admin queue, and I/O commands
// (Read, Write, Flush, Write Zeroes, Dataset Management with their ranges) on an I/O queue,
// through the target core's entry point with a fake transport (target_harness.h). Before the
// input runs, a controller of kSubsystemNqn (NS 1 malloc, NS 2 null) is connected, enabled
// and has I/O queue 1 (the harness's queue 0 is the admin queue, 1 the I/O queue).
//
// Input: records (TargetHarness::run_records): commands, polls, clock steps (keep-alive
// expiry), queues made and destroyed.
// Properties: the harness's (one completion per command, CID and SQID, teardown); and an
// Identify that succeeds defines every byte it returns (it is run again into a buffer filled
// with another pattern and must return the same bytes).
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
  nvmf::fuzz::TargetHarness harness;
  harness.add_default_subsystem(true);
  uint16_t cntlid = 0;
  FUZZ_CHECK_MSG(harness.bring_up(&cntlid), "the controller does not come up");
  harness.set_check_defined_bytes(true);
  harness.run_records(in);
  return 0;
}
