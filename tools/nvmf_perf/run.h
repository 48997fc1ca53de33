// nvmf_perf's run: the wiring between the checked settings, the target (a real one through
// -r, or the in-process sim target), the host library and the workers, and the report. With
// -r 'trtype:PCIe ...' it hands over to run_pcie() (pcie_run.h).
#pragma once

#include "options.h"

namespace nvmf::perf {

// Exit status: 0 no errors and no verify failures, 1 errors / failures / a failed setup,
// 2 a setting the target cannot honor (block size, queue depth, namespace count...).
int run(const Settings& settings);

}  // namespace nvmf::perf
