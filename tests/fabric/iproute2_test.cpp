// Where the fabric finds `ip` and `tc` (fabric/iproute2.h): the setting alone when set, else
// PATH and the system's directories, else the .debs unpacked beside the build; a prefix's
// libraries go with its tools; and what it says when there is none.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fabric/iproute2.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::fabric {
namespace {

namespace fs = std::filesystem;

class Iproute2Search : public ::testing::Test {
 protected:

  std::string make_tool(const std::string& relative) {
    const fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  std::string dir(const std::string& relative) {
    fs::create_directories(root_ / relative);
    return (root_ / relative).string();
  }
  ToolSearch empty_search() const {
    ToolSearch s;
    s.library_triplet = "x86_64-linux-gnu";
    return s;
  }

  testing_support::ScratchDir scratch_{"iproute2_search"};
  const fs::path root_ = scratch_.path();
};

TEST_F(Iproute2Search, AnUnpackedDebFoundByTheSettingRunsWithItsLibraries) {
  // As `dpkg -x iproute2_*.deb DIR` leaves it: bin/ip, sbin/tc, sbin/ip -> /bin/ip (absolute).
  const std::string ip = make_tool("deb/bin/ip");
  const std::string tc = make_tool("deb/sbin/tc");
  fs::create_symlink("/bin/ip", root_ / "deb/sbin/ip");
  const std::string libs = dir("deb/usr/lib/x86_64-linux-gnu");
  const std::string more = dir("deb/lib/x86_64-linux-gnu");
  ToolSearch s = empty_search();
  s.setting = (root_ / "deb").string();
  s.path = {dir("elsewhere")};
  const auto found_ip = find_tool("ip", s);
  ASSERT_TRUE(found_ip);
  // The absolute link means the prefix's own /bin/ip, never the machine's.
  EXPECT_EQ(fs::canonical(found_ip->path), fs::canonical(ip));
  EXPECT_EQ(found_ip->library_path, libs + ":" + more);
  const auto found_tc = find_tool("tc", s);
  ASSERT_TRUE(found_tc);
  EXPECT_EQ(found_tc->path, tc);
  EXPECT_EQ(found_tc->library_path, libs + ":" + more);
}

TEST_F(Iproute2Search, TheSettingMayNameTheToolsOwnDirectory) {
  make_tool("prefix/usr/sbin/tc");
  const std::string libs = dir("prefix/usr/lib/x86_64-linux-gnu");
  ToolSearch s = empty_search();
  s.setting = (root_ / "prefix/usr/sbin").string() + "/";
  const auto tc = find_tool("tc", s);
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->library_path, libs);
}

TEST_F(Iproute2Search, WhenSetTheSettingIsTheOnlyPlace) {
  ToolSearch s = empty_search();
  s.setting = dir("empty");
  s.path = {(root_ / "onpath").string()};
  make_tool("onpath/ip");
  EXPECT_FALSE(find_tool("ip", s));
  const std::string why = tool_missing("ip", s);
  EXPECT_NE(why.find("`ip` (iproute2) is not in TOPOCOLL_FABRIC_IPROUTE2=" + s.setting), std::string::npos) << why;
  EXPECT_NE(why.find(s.setting + "/usr/sbin"), std::string::npos) << why;
}

TEST_F(Iproute2Search, PathFirstThenTheSystemThenTheDebsBesideTheBuild) {
  ToolSearch s = empty_search();
  s.path = {dir("a"), (root_ / "b").string()};
  s.system_dirs = {dir("sys")};
  s.bundled_prefix = (root_ / "build/deps").string();
  EXPECT_FALSE(find_tool("tc", s));
  const std::string bundled = make_tool("build/deps/sbin/tc");
  const std::string bundled_libs = dir("build/deps/usr/lib/x86_64-linux-gnu");
  auto tc = find_tool("tc", s);
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->path, bundled);
  EXPECT_EQ(tc->library_path, bundled_libs);
  const std::string system = make_tool("sys/tc");
  EXPECT_EQ(find_tool("tc", s)->path, system);
  // A prefix put on PATH brings its libraries too (no global LD_LIBRARY_PATH needed).
  const std::string on_path = make_tool("b/tc");
  tc = find_tool("tc", s);
  EXPECT_EQ(tc->path, on_path);
  EXPECT_EQ(tc->library_path, "");  // root_/b is no prefix with libraries
  s.path = {(root_ / "pfx/usr/bin").string()};
  const std::string prefixed = make_tool("pfx/usr/bin/tc");
  const std::string prefixed_libs = dir("pfx/lib/x86_64-linux-gnu");
  tc = find_tool("tc", s);
  EXPECT_EQ(tc->path, prefixed);
  EXPECT_EQ(tc->library_path, prefixed_libs);
}

// A PATH entry is trusted by what it resolves to and by every directory on the way, and the
// resolved directory is what runs: a link in a directory anyone may write (or a link's
// target later changed) must not decide which `tc` root runs.
TEST_F(Iproute2Search, APathEntryIsTrustedByEveryDirectoryOnTheWayAndRunsResolved) {
  const std::string tool = make_tool("real/bin/tc");
  const std::string open_dir = dir("open");
  fs::permissions(open_dir, fs::perms::all);  // 0777, not sticky: anyone may replace its entries
  fs::create_symlink(root_ / "real/bin", root_ / "open/bin");
  ToolSearch s = empty_search();
  s.path = {(root_ / "open/bin").string()};
  EXPECT_FALSE(find_tool("tc", s)) << "a link in a directory anyone may write was trusted";
  const std::string safe_dir = dir("safe");
  fs::create_symlink(root_ / "real/bin", root_ / "safe/bin");
  s.path = {(root_ / "safe/bin").string()};
  const auto tc = find_tool("tc", s);
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->path, fs::canonical(tool).string()) << "the link, not its target, would be run";
}

// The setting and the bundled prefix name programs root runs as surely as PATH does: as
// root, a tool another user may replace there is not taken (nor one in a directory anyone
// may write), and the reason is in what the user is told.
TEST_F(Iproute2Search, AsRootAPrefixToolAnotherUserMayReplaceIsNotTaken) {
  if (::geteuid() != 0) GTEST_SKIP() << "the rule is root's";
  const std::string theirs = make_tool("theirs/sbin/tc");
  ASSERT_EQ(::chown(theirs.c_str(), 1000, 1000), 0);
  ToolSearch s = empty_search();
  s.setting = (root_ / "theirs").string();
  EXPECT_FALSE(find_tool("tc", s)) << "another user's tc would run as root";
  EXPECT_NE(tool_missing("tc", s).find("as root: a file no other user may replace"), std::string::npos)
      << tool_missing("tc", s);
  make_tool("open/sbin/tc");
  fs::permissions(root_ / "open/sbin", fs::perms::all);  // 0777, not sticky
  s = empty_search();
  s.bundled_prefix = (root_ / "open").string();
  EXPECT_FALSE(find_tool("tc", s)) << "a tc in a directory anyone may write would run as root";
  const std::string ours = make_tool("ours/sbin/tc");
  s.bundled_prefix = (root_ / "ours").string();
  const auto tc = find_tool("tc", s);
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->path, fs::canonical(ours).string());
}

TEST_F(Iproute2Search, SystemToolsNeedNoLibraries) {
  ToolSearch s = empty_search();
  s.system_dirs = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  if (const auto ip = find_tool("ip", s)) {
    EXPECT_EQ(ip->library_path, "");
  } else {
    GTEST_SKIP() << "no ip installed";
  }
}

TEST_F(Iproute2Search, NotFoundSaysWhereItLookedAndHowToProvideIt) {
  ToolSearch s = empty_search();
  s.path = {"/nowhere/bin"};
  s.system_dirs = {"/nowhere/sbin"};
  s.bundled_prefix = "/nowhere/build/deps";
  const std::string why = tool_missing("tc", s);
  for (const char* part : {"`tc` (iproute2) is not installed", "PATH (/nowhere/bin)", "/nowhere/sbin",
                           "/nowhere/build/deps", "TOPOCOLL_FABRIC_IPROUTE2 is unset", "apt-get install iproute2",
                           "perf/gpu/fetch_debs.sh", "dpkg -x"})
    EXPECT_NE(why.find(part), std::string::npos) << part << " not in: " << why;
}

}  // namespace
}  // namespace topocoll::fabric
