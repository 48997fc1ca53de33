// The one source of nvmf_test_pch (tests/CMakeLists.txt): the target exists to build the
// precompiled gtest/gmock header that every gtest binary reuses.
