// As root, the CLI writes only where no other user can redirect it (config/trusted_paths.h),
// except the directories of the user who ran sudo (SUDO_UID), who has root already: the
// README's commands, run with sudo, write into that user's own checkout.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/common/scratch_dir.h"
#include "tests/common/shell_run.h"

namespace topocoll::config {
namespace {

using testing_support::shell_run;

TEST(RootWritesCli, AnotherUsersDirectoryIsRefusedUnlessThatUserRanSudo) {
  if (::geteuid() != 0) GTEST_SKIP() << "handing a directory to another user needs root";
  const testing_support::ScratchDir dir("root_writes_cli");
  const std::string theirs = dir.file("theirs");
  std::filesystem::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  const std::string generate = std::string(TOPOCOLL_CLI) +
                               " generate bigraph --switches-per-group 2 --endpoints-per-switch 2 -o " + theirs +
                               "/t.json";
  const auto refused = shell_run("env -u SUDO_UID -u TOPOCOLL_TRUSTED_UIDS " + generate);
  EXPECT_NE(refused.status, 0) << refused.output;
  EXPECT_NE(refused.output.find(theirs + " belongs to user 65534, who could redirect what root writes there"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(std::filesystem::exists(theirs + "/t.json"));
  for (const std::string sudo : {"1234", "4295032830"}) {  // another user; 65534 + 2^32, which must not wrap to it
    const auto other = shell_run("env -u TOPOCOLL_TRUSTED_UIDS SUDO_UID=" + sudo + " " + generate);
    EXPECT_NE(other.status, 0) << other.output;
    EXPECT_NE(other.output.find("belongs to user 65534"), std::string::npos) << other.output;
  }
  // A container's root over a checkout mounted from the host: the owner trusted by name.
  const auto named = shell_run("env -u SUDO_UID TOPOCOLL_TRUSTED_UIDS=1000,65534 " + generate);
  EXPECT_EQ(named.status, 0) << named.output;
  std::filesystem::remove(theirs + "/t.json");
  const auto their_sudo = shell_run("env -u TOPOCOLL_TRUSTED_UIDS SUDO_UID=65534 " + generate);
  EXPECT_EQ(their_sudo.status, 0) << their_sudo.output;
  EXPECT_TRUE(std::filesystem::exists(theirs + "/t.json"));
}

}  // namespace
}  // namespace topocoll::config
