#include "tools/demo_fabric_access.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fabric/fabric_plan.h"
#include "fabric/fabric_record.h"
#include "fabric/live_fabric.h"
#include "fabric/system_command.h"

namespace topocoll::cli {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

DemoFabricAccess::DemoFabricAccess(DemoFabricAccess&& other) noexcept
    : reason_(std::move(other.reason_)), fd_(other.fd_) {
  other.fd_ = -1;
}

DemoFabricAccess::~DemoFabricAccess() {
  if (fd_ >= 0) ::close(fd_);
}

DemoFabricAccess DemoFabricAccess::refused(const std::string& reason) {
  DemoFabricAccess a;
  a.reason_ = reason;
  return a;
}

DemoFabricAccess DemoFabricAccess::check(const topo::Topology& topology, const std::string& name) {
  DemoFabricAccess a;
  // The probe carries the demo fabric's prefix, so even a probe cut short by SIGKILL is
  // something `fabric down --name NAME --force` removes.
  const std::string probe = "tf-" + name + "-probe~" + std::to_string(::getpid());
  a.reason_ = fabric::machine_cannot_run(fabric::estimate_fabric_size(topology), probe);
  if (!a.reason_.empty()) return a;
  try {
    const std::string path = fabric::fabric_file_path(name, ".demo-lock");
    fabric::make_state_dir();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      a.reason_ = "cannot open " + path + ": " + std::strerror(errno);
      return a;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char text[32] = {};
      [[maybe_unused]] const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
      ::close(fd);
      long pid = std::strtol(text, nullptr, 10);
      a.reason_ = "another `topocoll demo`" + (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string()) +
                  " is measuring on fabric " + name + " now";
      return a;
    }
    const std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) [[maybe_unused]] const ssize_t n = ::pwrite(fd, me.data(), me.size(), 0);
    a.fd_ = fd;  // from here on the destructor drops the claim on every return
    if (fabric::load_record(name)) {
      a.reason_ = "a fabric named " + name + " is up already (a demo stopped before its teardown, or " +
                  "someone's own): `topocoll fabric down --name " + name + "` removes it";
    } else if (const auto stray = fabric::unrecorded_namespaces(name); !stray.empty()) {
      a.reason_ = "namespaces named like fabric " + name + "'s are there and no record lists them (" +
                  joined(stray) + "): `topocoll fabric down --name " + name + " --force` removes them";
    }
  } catch (const std::exception& e) {
    a.reason_ = e.what();
  }
  if (!a.reason_.empty() && a.fd_ >= 0) {
    ::close(a.fd_);
    a.fd_ = -1;
  }
  // One line, whatever the fabric layer said.
  if (const auto nl = a.reason_.find('\n'); nl != std::string::npos) a.reason_.resize(nl);
  return a;
}

}  // namespace topocoll::cli
