// The dynamic symbol table of libnccl-topocoll.so (nm -D): the five net structs are there,
// and nothing but the plugin faces' C names is exported (no C++ internals).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::set<std::string> exported_symbols(std::string* error) {
  std::string cmd = std::string("nm -D --defined-only ") + TOPOCOLL_PLUGIN_PATH + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::set<std::string> names;
  if (!pipe) {
    *error = "cannot run nm";
    return names;
  }
  std::array<char, 1024> line{};
  while (fgets(line.data(), int(line.size()), pipe.get())) {
    std::istringstream in(line.data());
    std::string address, type, name;
    if (in >> address >> type >> name) names.insert(name);
  }
  return names;
}

TEST(NetPluginSymbols, ExportsTheFiveNetStructsAndNothingUnexpected) {
  std::string error;
  auto names = exported_symbols(&error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_FALSE(names.empty()) << "nm found no dynamic symbols in " << TOPOCOLL_PLUGIN_PATH;
  for (const char* s : {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9", "ncclNetPlugin_v8",
                        "ncclNetPlugin_v7"})
    EXPECT_TRUE(names.count(s)) << s << " is not exported";
  // Other faces export their structs (tuner) and NCCL's C API (interposer); anything else,
  // a C++ mangled name above all, is a leak.
  const std::regex allowed(
      "ncclNetPlugin_v(7|8|9|10|11)|ncclTunerPlugin_v[0-9]+|p?nccl[A-Z][A-Za-z0-9_]*|topocoll_library_version");
  // AddressSanitizer builds add an ODR indicator next to every exported global.
  const std::string odr_prefix = "__odr_asan.";
  for (const auto& name : names) {
    const std::string plain = name.rfind(odr_prefix, 0) == 0 ? name.substr(odr_prefix.size()) : name;
    EXPECT_TRUE(std::regex_match(plain, allowed)) << "unexpected export: " << name;
  }
}

}  // namespace
