// The exported symbol set of libnccl-topocoll.so (nm -D): the interposer's 16 NCCL entry
// points with default visibility, NCCL reached only through its pnccl* symbols, and no C++
// names leaking out.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace {

// name -> nm type letter, for the dynamic symbol table.
std::map<std::string, char> dynamic_symbols(const std::string& library) {
  std::map<std::string, char> out;
  const std::string cmd = "nm -D " + library + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char line[1024];
  while (fgets(line, sizeof line, pipe)) {
    std::istringstream in(line);
    std::string a, b, c;
    in >> a >> b;
    if (in >> c) out[c] = b[0];  // "addr T name"
    else out[b] = a[0];          // "U name"
  }
  pclose(pipe);
  return out;
}

const char* const kInterposed[] = {
    "ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclAlltoAll",
    "ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd", "ncclCommInitRank", "ncclCommInitRankConfig",
    "ncclCommInitRankScalable", "ncclCommInitAll", "ncclCommSplit", "ncclCommShrink",
    "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort", "ncclCommRegister",
    "ncclCommDeregister", "ncclCommGetAsyncError", "ncclCommRevoke", "ncclGetLastError"};

TEST(InterposerSymbols, ExactlyTheInterposedNcclNamesAreDefined) {
  const auto syms = dynamic_symbols(TOPOCOLL_PLUGIN_PATH);
  ASSERT_FALSE(syms.empty()) << "nm -D " << TOPOCOLL_PLUGIN_PATH;
  std::set<std::string> expected(std::begin(kInterposed), std::end(kInterposed));
  for (const char* name : kInterposed) {
    auto it = syms.find(name);
    ASSERT_NE(it, syms.end()) << name << " is not exported";
    EXPECT_EQ(it->second, 'T') << name << " must be a strong, default-visibility definition";
    // The forwarding target comes from libnccl, undefined here.
    const std::string p = std::string("p") + name;
    auto pit = syms.find(p);
    ASSERT_NE(pit, syms.end()) << p << " is not referenced";
    EXPECT_EQ(pit->second, 'U') << p << " must resolve to libnccl";
  }
  for (const auto& [name, type] : syms) {
    if (type == 'U' || type == 'w' || type == 'v') continue;  // references, not definitions
    // Other NCCL-facing definitions belong to the net and tuner plugin faces.
    const bool plugin_face = name.rfind("ncclNet", 0) == 0 || name.rfind("ncclCollNet", 0) == 0 ||
                             name.rfind("ncclTuner", 0) == 0;
    if (name.rfind("nccl", 0) == 0 && !plugin_face) {
      EXPECT_TRUE(expected.count(name)) << name << " is defined but must stay NCCL's";
    }
    EXPECT_NE(name.rfind("pnccl", 0), 0u) << name << ": the library must not define pnccl*";
    EXPECT_NE(name.rfind("_Z", 0), 0u) << name << ": a C++ symbol leaks out";
  }
}

}  // namespace
