// Symbol visibility of libnvmf_host.so. The library is built with -fvisibility=hidden and
// -fvisibility-inlines-hidden, so nothing leaves the shared object unless it says so:
//   NVMF_API    on a public class or function of include/nvmf/*.h: exported. On a class, its
//               member functions, static members, vtable and typeinfo are exported.
//   NVMF_LOCAL  on the library's own parts of an exported class (its Impl structs, defined in
//               src/): kept inside, although a nested class would inherit NVMF_API.
// ELF needs no import/export distinction, so applications see the same attribute. The test
// tests/install/check_exports.sh fails when the shared object exports anything else.
#pragma once

#if defined(__GNUC__)
#define NVMF_API __attribute__((visibility("default")))
#define NVMF_LOCAL __attribute__((visibility("hidden")))
#else
#define NVMF_API
#define NVMF_LOCAL
#endif
