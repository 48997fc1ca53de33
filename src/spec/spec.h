// Umbrella header: every NVMe / NVMe-oF / NVMe-RDMA wire format in src/spec.
#pragma once

#include "spec/admin.h"
#include "spec/discovery.h"
#include "spec/fabrics.h"
#include "spec/nvme.h"
#include "spec/rdma_cm.h"
#include "spec/sgl.h"
#include "spec/status.h"
#include "spec/string_field.h"
#include "spec/wire.h"
