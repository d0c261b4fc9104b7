#include "fabric/system_command.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "config/env.h"
#include "config/trusted_paths.h"
#include "fabric/iproute2.h"

extern char** environ;

namespace topocoll::fabric {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// `pid`'s exit code (128 + signal when killed). A wait that fails is an error, never a
// success: with SIGCHLD ignored (inherited from a parent that ignores it) Linux reaps
// children itself and waitpid finds none (ECHILD), which would read as exit 0.
int exit_status_of(pid_t pid, const std::string& what) {
  int st = 0;
  for (;;) {
    if (::waitpid(pid, &st, 0) >= 0) break;
    if (errno == EINTR) continue;
    throw FabricError("cannot learn how " + what + " ended: waitpid: " + errno_text(errno) +
                      (errno == ECHILD ? " (is SIGCHLD ignored? topocoll needs its children's exit statuses)" : ""));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

std::string find_program(const std::string& name) {
  return config::find_executable(name, config::env().path + ":/usr/sbin:/sbin:/usr/bin:/bin");
}

CommandResult run_command(const std::vector<std::string>& argv, const std::string& input) {
  CommandResult result;
  // iproute2 comes from where fabric/iproute2.h finds it, with its prefix's libraries.
  std::string program;
  std::string library_path;
  if (argv.at(0) == "ip" || argv.at(0) == "tc") {
    if (const auto& tool = iproute2_tool(argv[0])) {
      program = tool->path;
      library_path = tool->library_path;
    }
  } else {
    program = find_program(argv[0]);
  }
  if (program.empty()) {
    result.status = 127;
    result.output = argv[0] == "ip" || argv[0] == "tc" ? tool_missing(argv[0], iproute2_search())
                                                       : argv[0] + ": not installed";
    return result;
  }
  // Built before fork: the child only makes system calls.
  std::vector<std::string> environment;
  std::string inherited_libraries;
  for (char** e = environ; *e; ++e) {
    if (!library_path.empty() && std::strncmp(*e, "LD_LIBRARY_PATH=", 16) == 0) inherited_libraries = *e + 16;
    else environment.emplace_back(*e);
  }
  if (!library_path.empty())
    environment.push_back("LD_LIBRARY_PATH=" + library_path +
                          (inherited_libraries.empty() ? "" : ":" + inherited_libraries));
  std::vector<char*> envp;
  for (auto& kv : environment) envp.push_back(kv.data());
  envp.push_back(nullptr);
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw FabricError("pipe: " + errno_text(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw FabricError("pipe: " + errno_text(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args[0] = const_cast<char*>(program.c_str());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (const int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    throw FabricError("fork: " + errno_text(err));
  }
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execve(program.c_str(), args.data(), envp.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  // Feed stdin and drain stdout together: a large batch must not deadlock on full pipes. Our
  // end of stdin does not block: a blocking write of the whole batch waits for the tool to
  // read all of it while the tool waits for us to read what it wrote.
  ::fcntl(in[1], F_SETFL, ::fcntl(in[1], F_GETFL) | O_NONBLOCK);
  size_t written = 0;
  if (input.empty()) ::close(in[1]), in[1] = -1;
  // A tool that exits early must not kill us with SIGPIPE while we feed it.
  const auto previous_sigpipe = ::signal(SIGPIPE, SIG_IGN);
  for (;;) {
    pollfd p[2] = {{out[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    const int n = in[1] >= 0 ? 2 : 1;
    if (::poll(p, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = ::write(in[1], input.data() + written, input.size() - written);
      if (w > 0) written += size_t(w);
      const bool again = w < 0 && (errno == EAGAIN || errno == EINTR);
      if ((w < 0 && !again) || written == input.size()) ::close(in[1]), in[1] = -1;
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      const ssize_t r = ::read(out[0], buf, sizeof buf);
      if (r <= 0) break;
      result.output.append(buf, size_t(r));
    }
  }
  if (in[1] >= 0) ::close(in[1]);
  ::close(out[0]);
  ::signal(SIGPIPE, previous_sigpipe);
  result.status = exit_status_of(pid, argv.empty() ? std::string() : argv[0]);
  return result;
}

void run_checked(const std::vector<std::string>& argv, const std::string& what,
                 const std::string& input) {
  const CommandResult r = run_command(argv, input);
  if (r.status == 0) return;
  std::string output = r.output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  throw FabricError(what + ": `" + joined(argv) + "` failed (exit " + std::to_string(r.status) +
                    ")" + (output.empty() ? "" : ": " + output));
}

int run_in_netns(const std::string& name, const std::function<int()>& body) {
  const int fd = ::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FabricError("network namespace " + name + ": " + errno_text(errno));
  int why[2];  // the child's setns errno, when it fails
  if (::pipe2(why, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(fd);
    throw FabricError("pipe: " + errno_text(err));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (const int f : {fd, why[0], why[1]}) ::close(f);
    throw FabricError("fork: " + errno_text(err));
  }
  if (pid == 0) {
    ::close(why[0]);
    if (::setns(fd, CLONE_NEWNET) != 0) {
      const int err = errno;
      (void)!::write(why[1], &err, sizeof err);
      _exit(126);
    }
    ::close(why[1]);
    _exit(body());
  }
  ::close(fd);
  ::close(why[1]);
  int err = 0;
  const bool setns_failed = ::read(why[0], &err, sizeof err) == ssize_t(sizeof err);
  ::close(why[0]);
  const int code = exit_status_of(pid, "a child in network namespace " + name);
  if (setns_failed) throw FabricError("cannot enter network namespace " + name + " (setns: " + errno_text(err) + ")");
  return code;
}

void become_endpoint_host(const std::string& name, const std::string& hostname) {
  const int fd = ::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw FabricError("cannot enter namespace " + name + " (" + std::strerror(err) + "; root is needed)");
  }
  ::close(fd);
  if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(hostname.c_str(), hostname.size()) != 0) {
    const int err = errno;
    throw FabricError("cannot take host name " + hostname + " in a UTS namespace of its own: " +
                      std::strerror(err));
  }
}

}  // namespace topocoll::fabric
