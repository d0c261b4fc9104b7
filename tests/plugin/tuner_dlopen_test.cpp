// The built libnccl-topocoll.so as NCCL finds it: through the libnccl-tuner-topocoll.so name
// (NCCL_TUNER_PLUGIN=topocoll) and inside the net plugin library libnccl-net-topocoll.so
// (NCCL 2.28 dlsym()s the tuner symbols there when no tuner library is named). Exactly the
// four tuner structs are exported for the tuner face (nm -D).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "plugin/nccl_api/tuner_v2.h"
#include "plugin/nccl_api/tuner_v3.h"
#include "plugin/nccl_api/tuner_v4.h"
#include "plugin/nccl_api/tuner_v5.h"

namespace {

const std::string kLibDir = std::string(TOPOCOLL_BINARY_DIR) + "/plugin/";
const char* kSymbols[] = {"ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3",
                          "ncclTunerPlugin_v2"};

void quiet_logger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

struct Library {
  explicit Library(const std::string& path) : handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
  void* handle;
};

TEST(TunerLibrary, TunerNameExportsEveryVersion) {
  unsetenv("TOPOCOLL_TOPO_FILE");
  Library lib(kLibDir + "libnccl-tuner-topocoll.so");
  ASSERT_NE(lib.handle, nullptr) << dlerror();
  for (const char* sym : kSymbols) {
    void* p = dlsym(lib.handle, sym);
    ASSERT_NE(p, nullptr) << sym;
    EXPECT_STREQ(*static_cast<const char* const*>(p), "topocoll") << sym;
  }
  // A whole init / getCollInfo / finalize round through the v5 struct NCCL 2.28 uses; no
  // topology is set, so the table must come back unchanged.
  auto* v5 = static_cast<ncclTuner_v5_t*>(dlsym(lib.handle, "ncclTunerPlugin_v5"));
  void* ctx = nullptr;
  ASSERT_EQ(v5->init(&ctx, 7, 4, 4, quiet_logger, nullptr, nullptr), ncclSuccess);
  float table[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  for (auto& row : table)
    for (float& v : row) v = 3.0f;
  int channels = 0;
  ASSERT_EQ(v5->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, reinterpret_cast<float**>(table),
                            NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, &channels),
            ncclSuccess);
  for (auto& row : table)
    for (float v : row) EXPECT_EQ(v, 3.0f);
  EXPECT_EQ(v5->finalize(ctx), ncclSuccess);
}

TEST(TunerLibrary, NetPluginNameCarriesTheTunerToo) {
  Library lib(kLibDir + "libnccl-net-topocoll.so");
  ASSERT_NE(lib.handle, nullptr) << dlerror();
  EXPECT_NE(dlsym(lib.handle, "ncclTunerPlugin_v5"), nullptr);
}

TEST(TunerLibrary, NmShowsTheFourTunerSymbols) {
  std::string cmd = "nm -D --defined-only " + kLibDir + "libnccl-topocoll.so 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::set<std::string> exported;
  std::array<char, 512> line{};
  while (fgets(line.data(), int(line.size()), pipe.get())) {
    std::istringstream in(line.data());
    std::string addr, type, name;
    if (in >> addr >> type >> name) exported.insert(name);
  }
  for (const char* sym : kSymbols) EXPECT_TRUE(exported.count(sym)) << sym << " not exported";
  // Nothing of the tuner's internals leaks out.
  for (const auto& name : exported) {
    if (name.rfind("ncclTunerPlugin_", 0) == 0) {
      EXPECT_TRUE(name == kSymbols[0] || name == kSymbols[1] || name == kSymbols[2] || name == kSymbols[3])
          << name;
    }
    EXPECT_EQ(name.find("TopologyTuner"), std::string::npos) << name;
    EXPECT_EQ(name.find("tuner"), std::string::npos) << name;
  }
}

}  // namespace
