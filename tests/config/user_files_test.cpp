// config/user_files.h: files read are regular and bounded; files written are replaced whole,
// never written through a link and never put in the place of a device, pipe or directory.
#include "config/user_files.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/common/scratch_dir.h"

namespace topocoll::config {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserFileError& e) {
    return e.what();
  }
  return "";
}

TEST(UserFiles, ReadsARegularFileWithinItsBound) {
  const ScratchDir dir("user_files_read");
  const std::string path = dir.file("t.json");
  std::ofstream(path) << "0123456789";
  EXPECT_EQ(read_user_file(path, 10, "a topology file"), "0123456789");
  EXPECT_EQ(error_of([&] { read_user_file(path, 9, "a topology file"); }),
            "\"" + path + "\" is 10 bytes, more than the 9 bytes a topology file may have");
  EXPECT_NE(error_of([&] { read_user_file(dir.file("none"), 10, "a topology file"); }).find("No such file"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { read_user_file(dir.path(), 10, "a topology file"); }),
            "\"" + dir.path() + "\" is a directory, not a topology file (a regular file is expected)");
}

TEST(UserFiles, APipeIsRefusedNotWaitedOn) {
  const ScratchDir dir("user_files_pipe");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_user_file(fifo, 10, "a host list"); }),
            "\"" + fifo + "\" is a pipe, not a host list (a regular file is expected)");
}

// Refused before it is opened: opening a device has effects of its own (a watchdog arms, a
// tape rewinds). The kernel's open notification (inotify IN_OPEN, which a look by O_PATH
// does not raise) says whether the name was opened; a link to it is looked through, not opened.
TEST(UserFiles, WhatIsNotARegularFileIsNeverOpened) {
  const ScratchDir dir("user_files_not_opened");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(fifo, dir.file("link"));
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(::inotify_add_watch(watch, fifo.c_str(), IN_OPEN), 0);
  EXPECT_NE(error_of([&] { read_user_file(dir.file("link"), 10, "a host list"); }).find("is a pipe"),
            std::string::npos);
  char events[256];
  EXPECT_LT(::read(watch, events, sizeof events), 0) << "the pipe was opened";
  // The check itself: a real open is seen.
  const int opened = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(opened, 0);
  EXPECT_GT(::read(watch, events, sizeof events), 0);
  ::close(opened);
  ::close(watch);
}

// The missing directories of an output path are made (absolute and relative), through the
// links that already were on it; a file in the way is named.
TEST(UserFiles, AnOutputDirectoryIsMadeWithEveryMissingParent) {
  const ScratchDir dir("user_files_out_dir");
  EXPECT_EQ(error_of([&] { prepare_output_dir(dir.file("a/b/c")); }), "");
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("a/b/c")));
  std::filesystem::create_symlink(dir.file("a"), dir.file("via"));
  EXPECT_EQ(error_of([&] { prepare_output_dir(dir.file("via/b/d/e")); }), "");
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("a/b/d/e")));
  std::ofstream(dir.file("a/file")) << "x";
  EXPECT_NE(error_of([&] { prepare_output_dir(dir.file("a/file/f")); }).find(dir.file("a/file") + " is not a directory"),
            std::string::npos);
  const std::string here = std::filesystem::current_path().string();
  std::filesystem::current_path(dir.path());
  const std::string relative = error_of([&] { prepare_output_dir("rel/x/./y"); });
  std::filesystem::current_path(here);
  EXPECT_EQ(relative, "");
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("rel/x/y")));
}

TEST(UserFiles, ReplacingALinkReplacesTheLinkNotItsTarget) {
  const ScratchDir dir("user_files_link");
  const std::string target = dir.file("target"), link = dir.file("report.json");
  std::ofstream(target) << "keep";
  fs::create_symlink(target, link);
  replace_file(link, "new");
  EXPECT_EQ(contents(target), "keep");
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(contents(link), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2) << "a temporary was left";
}

TEST(UserFiles, ADevicePipeOrDirectoryIsNeverReplaced) {
  const ScratchDir dir("user_files_special");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { replace_file(fifo, "x"); }),
            "cannot write \"" + fifo + "\": it is a pipe, and only a regular file is replaced");
  EXPECT_TRUE(fs::is_fifo(fifo));
  const std::string sub = dir.file("sub");
  fs::create_directory(sub);
  EXPECT_NE(error_of([&] { replace_file(sub, "x"); }).find("it is a directory"), std::string::npos);
  EXPECT_TRUE(fs::is_directory(sub));
  // A device node of /dev/null's numbers, made in the scratch directory (root only), so a
  // broken check replaces nothing outside it.
  const std::string device = dir.file("null");
  if (::mknod(device.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
    EXPECT_NE(error_of([&] { replace_file(device, "x"); }).find("it is a character device"), std::string::npos);
    EXPECT_TRUE(fs::is_character_file(device));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()),
            fs::exists(device) ? 3 : 2)
      << "a temporary was left";
}

// A disk that fills mid-write (here a file size limit, EFBIG): an error naming the path,
// the old file as it was and no temporary beside it. In a child, whose limit dies with it.
TEST(UserFiles, AFullDiskLeavesTheOldFileAndNoTemporary) {
  const ScratchDir dir("user_files_full");
  const std::string path = dir.file("report.json");
  std::ofstream(path) << "old";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string e = error_of([&] { replace_file(path, std::string(1 << 20, 'x')); });
    ::_exit(e.find("cannot write " + path + ": File too large") == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "no error, or not one naming the path";
  EXPECT_EQ(contents(path), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "a temporary was left";
}

// A file replaced keeps its mode (a private file stays private); a new one gets what the
// umask leaves of 0666. The old code made every file 0644.
TEST(UserFiles, AReplacedFileKeepsItsModeAndANewOneFollowsTheUmask) {
  const ScratchDir dir("user_files_mode");
  const std::string secret = dir.file("secret.json");
  std::ofstream(secret) << "old";
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  replace_file(secret, "new");
  struct stat st {};
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(contents(secret), "new");
  const mode_t old_mask = ::umask(027);
  replace_file(dir.file("fresh.json"), "x");
  ::umask(old_mask);
  ASSERT_EQ(::stat(dir.file("fresh.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

// The temporary beside the file has a short name of its own: a name as long as a name may
// be (255 bytes) is written, not refused for the temporary's suffix.
TEST(UserFiles, ANameOfTheLongestLengthIsWritten) {
  const ScratchDir dir("user_files_long");
  const std::string path = dir.file(std::string(250, 'n') + ".json");
  EXPECT_EQ(error_of([&] { replace_file(path, "x"); }), "");
  EXPECT_EQ(contents(path), "x");
}

// As root, no file is written under a directory another user controls: that user could
// move root's directory away and put a link to /etc in its place (here the output directory
// `run1`, made by root inside a directory of uid 65534's). Nothing is created there.
TEST(UserFiles, AsRootADirectoryAnotherUserControlsIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "handing a directory to another user needs root";
  const ScratchDir dir("user_files_theirs");
  const std::string theirs = dir.file("theirs");
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  const std::string why = theirs + " belongs to user 65534, who could redirect what root writes there";
  EXPECT_NE(error_of([&] { prepare_output_dir(theirs + "/run1"); }).find(why), std::string::npos);
  EXPECT_FALSE(fs::exists(theirs + "/run1"));
  const std::string report = theirs + "/report.json";
  EXPECT_EQ(error_of([&] { replace_file(report, "x"); }),
            "cannot write \"" + report + "\" as root: " + why + " (write it under directories only root or you can change, or trust that user with TOPOCOLL_TRUSTED_UIDS)");
  EXPECT_FALSE(fs::exists(report));
  // Root's own directory beside it is fine, and a link to theirs from it is not.
  EXPECT_EQ(error_of([&] { prepare_output_dir(dir.file("mine/run1")); }), "");
  fs::create_directory_symlink(theirs, dir.file("mine/link"));
  EXPECT_NE(error_of([&] { replace_file(dir.file("mine/link/x.json"), "x"); }).find(why), std::string::npos);
}

// A file another user planted at root's output name in a shared directory (/tmp) lends the
// new file neither its mode nor its owner: root's output stays root's. No set-id bit is
// kept from any file.
TEST(UserFiles, AsRootAFilePlantedByAnotherUserLendsNeitherModeNorOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "a file of another user's needs root to make";
  const ScratchDir dir("user_files_planted");
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  const std::string planted = dir.file("report.json");
  std::ofstream(planted) << "theirs";
  ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0666), 0);
  const mode_t old_mask = ::umask(022);
  replace_file(planted, "root's");
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat(planted.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  const std::string setuid = dir.file("tool.json");
  std::ofstream(setuid) << "x";
  ASSERT_EQ(::chmod(setuid.c_str(), 04755), 0);
  replace_file(setuid, "y");
  ASSERT_EQ(::stat(setuid.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

}  // namespace
}  // namespace topocoll::config
