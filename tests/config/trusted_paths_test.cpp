// config/trusted_paths.h: as root, topocoll writes and runs only where no other user can
// redirect it. The directories here are made by the test and handed to a stranger (uid
// 65534, "nobody") with chown, so the cases need root; as another user they are skipped.
#include "config/trusted_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/scratch_dir.h"

namespace topocoll::config {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;

constexpr uid_t kStranger = 65534;

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "handing a directory to another user needs root"

std::string made(const std::string& path, mode_t mode, uid_t owner = 0) {
  fs::create_directories(path);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0) << path;
  EXPECT_EQ(::chown(path.c_str(), owner, owner), 0) << path;
  return path;
}

TEST(TrustedPaths, ADirectoryOnlyRootControlsIsSafe) {
  REQUIRE_ROOT();
  const ScratchDir dir("trusted_safe");
  const std::string mine = made(dir.file("a/b"), 0755);
  EXPECT_EQ(unsafe_directory(mine, true, "redirect it"), "");
  EXPECT_EQ(unsafe_directory(mine + "/not/made/yet", true, "redirect it"), "");
  // /tmp (sticky, writable by all) is safe to name files in, not as a directory of records.
  const std::string sticky = made(dir.file("sticky"), 01777);
  EXPECT_EQ(unsafe_directory(sticky, true, "redirect it"), "");
  EXPECT_EQ(unsafe_directory(sticky, false, "change the records"),
            sticky + " is writable by others (mode 1777), who could change the records");
  EXPECT_EQ(unsafe_directory(sticky + "/below", false, "change the records"), "");  // made by us
}

TEST(TrustedPaths, ADirectoryOfAnotherUserOrWritableByOthersIsNot) {
  REQUIRE_ROOT();
  const ScratchDir dir("trusted_unsafe");
  const std::string theirs = made(dir.file("theirs"), 0755, kStranger);
  const std::string below = made(theirs + "/run1", 0755);  // root's own, under theirs
  EXPECT_EQ(unsafe_directory(below, true, "redirect it"),
            theirs + " belongs to user 65534, who could redirect it");
  const std::string open = made(dir.file("open"), 0777);
  EXPECT_EQ(unsafe_directory(open + "/x", true, "redirect it"),
            open + " is writable by others (mode 0777), who could redirect it");
}

// A link is followed where it is met: the directories of its target are looked at, and a
// link in a directory another user controls is theirs to point anywhere.
TEST(TrustedPaths, LinksAreWalkedAsTheKernelResolvesThem) {
  REQUIRE_ROOT();
  const ScratchDir dir("trusted_links");
  const std::string theirs = made(dir.file("theirs"), 0755, kStranger);
  const std::string target = made(theirs + "/out", 0755);
  const std::string mine = made(dir.file("mine"), 0755);
  fs::create_directory_symlink(target, mine + "/to-theirs");
  EXPECT_EQ(unsafe_directory(mine + "/to-theirs", true, "redirect it"),
            theirs + " belongs to user 65534, who could redirect it");
  // A relative link, and ".." after it, resolved from the link's directory.
  fs::create_directory_symlink("../theirs/out", mine + "/relative");
  EXPECT_EQ(unsafe_directory(mine + "/relative/..", true, "redirect it"),
            theirs + " belongs to user 65534, who could redirect it");
  // The other way round: a link to root's own directory, planted in theirs.
  const std::string safe = made(dir.file("safe"), 0755);
  fs::create_directory_symlink(safe, theirs + "/to-safe");
  EXPECT_EQ(unsafe_directory(theirs + "/to-safe", true, "redirect it"),
            theirs + " belongs to user 65534, who could redirect it");
  // A link to a safe directory in a safe one is fine.
  fs::create_directory_symlink(safe, mine + "/to-safe");
  EXPECT_EQ(unsafe_directory(mine + "/to-safe", true, "redirect it"), "");
}

// A link in a shared sticky directory (/tmp) is followed only when a trusted user or the
// directory's owner made it: anyone else could point it elsewhere after the check.
TEST(TrustedPaths, ALinkAnotherUserPlantedInASharedDirectoryIsNotFollowed) {
  REQUIRE_ROOT();
  const ScratchDir dir("trusted_planted");
  const std::string shared = made(dir.file("shared"), 01777);
  const std::string safe = made(dir.file("safe"), 0755);
  const std::string planted = shared + "/planted";
  fs::create_directory_symlink(safe, planted);
  ASSERT_EQ(::lchown(planted.c_str(), kStranger, kStranger), 0);
  EXPECT_EQ(unsafe_directory(planted, true, "redirect it"),
            planted + " is a link of user 65534 in the shared directory " + shared + ", who could redirect it");
  const std::string mine = shared + "/mine";
  fs::create_directory_symlink(safe, mine);
  EXPECT_EQ(unsafe_directory(mine, true, "redirect it"), "");
}

// The directory a path ends in is judged as the last one whatever spells it ("/tmp/." is
// /tmp), and ".." below a directory still to be made leads back to real ones, which are
// looked at.
TEST(TrustedPaths, DotsAtTheEndAndBelowMissingDirectoriesAreResolved) {
  REQUIRE_ROOT();
  const ScratchDir dir("trusted_dots");
  const std::string sticky = made(dir.file("sticky"), 01777);
  EXPECT_EQ(unsafe_directory(sticky + "/.", false, "change the records"),
            sticky + " is writable by others (mode 1777), who could change the records");
  const std::string theirs = made(dir.file("theirs"), 0755, kStranger);
  const std::string mine = made(dir.file("mine"), 0755);
  EXPECT_EQ(unsafe_directory(mine + "/new/../../theirs/x", true, "redirect it"),
            theirs + " belongs to user 65534, who could redirect it");
  EXPECT_EQ(unsafe_directory(mine + "/new/deeper/../more", true, "redirect it"), "");
}

TEST(TrustedPaths, ProgramsAreFoundOnlyInAbsoluteDirectoriesAndAsRootOnlyInSafeOnes) {
  const ScratchDir dir("trusted_programs");
  auto program = [](const std::string& path, mode_t mode) {
    std::ofstream(path) << "#!/bin/sh\nexit 0\n";
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  };
  const std::string bin = dir.file("bin");
  fs::create_directories(bin);
  ::chmod(bin.c_str(), 0755);
  program(bin + "/tc-prog", 0755);
  EXPECT_EQ(find_executable("tc-prog", "/nonexistent:" + bin), bin + "/tc-prog");
  EXPECT_EQ(find_executable("tc-no-such-prog", bin), "");
  // "." and an empty entry are the working directory: never searched.
  const fs::path before = fs::current_path();
  fs::current_path(bin);
  EXPECT_EQ(find_executable("tc-prog", ".:"), "");
  EXPECT_EQ(find_executable("tc-prog", ":"), "");
  EXPECT_EQ(find_executable("tc-prog", "bin"), "");
  fs::current_path(before);
  if (::geteuid() != 0) return;
  // As root: a program in a directory of another user's, or one others may rewrite, is not run.
  const std::string theirs = made(dir.file("theirs"), 0755, kStranger);
  program(theirs + "/tc-prog", 0755);
  EXPECT_EQ(find_executable("tc-prog", theirs), "");
  const std::string shared = made(dir.file("shared"), 0755);
  program(shared + "/tc-prog", 0777);
  EXPECT_EQ(find_executable("tc-prog", shared + ":" + bin), bin + "/tc-prog");
  // A link in a safe directory to a root-owned program in theirs: they can replace the file.
  const std::string linked = made(dir.file("linked"), 0755);
  program(theirs + "/tc-other", 0755);
  ASSERT_EQ(::chown((theirs + "/tc-other").c_str(), 0, 0), 0);
  fs::create_symlink(theirs + "/tc-other", linked + "/tc-other");
  EXPECT_EQ(find_executable("tc-other", linked), "");
}

}  // namespace
}  // namespace topocoll::config
