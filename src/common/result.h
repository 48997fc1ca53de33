// Result<T>, Errc, Error: public API of libnvmf_host, defined once in include/nvmf/result.h.
// The stack's layers include this name; it forwards so that there is one definition.
#pragma once

#include "nvmf/result.h"
