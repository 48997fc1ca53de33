// NVMe completion status values (SCT, SC, Status, status_name): public API of libnvmf_host,
// defined once in include/nvmf/status.h. The stack's layers include this name; it forwards so
// that there is one definition.
#pragma once

#include "nvmf/status.h"
