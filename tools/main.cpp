// `topocoll`: the command-line face of the library. Dispatches to registered subcommands.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "config/version.h"
#include "tools/flag_value.h"
#include "tools/command.h"

namespace topocoll::cli {

static std::vector<Command>& registry() {
  static std::vector<Command> all;
  return all;
}

bool register_command(Command command) {
  registry().push_back(command);
  return true;
}

const std::vector<Command>& commands() {
  auto& all = registry();
  std::sort(all.begin(), all.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  return all;
}

static void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: topocoll <command> [args]\n\ncommands:\n");
  for (const auto& c : commands())
    std::fprintf(out, "  %-10.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.summary.size()),
                 c.summary.data());
  std::fprintf(out, "\n`topocoll <command> --help` describes one command; `topocoll --version` says which\n"
                    "topocoll this is.\n");
}

}  // namespace topocoll::cli

int main(int argc, char** argv) {
  using namespace topocoll::cli;
  // Exit statuses of the commands and ranks topocoll starts decide what it reports: a
  // parent that ignores SIGCHLD (kept across exec) would have Linux reap them unseen.
  ::signal(SIGCHLD, SIG_DFL);
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    if (argc < 3) {
      print_usage(stdout);
      return 0;
    }
    // `topocoll help plan`: that command's own help.
    for (const auto& c : commands())
      if (c.name == argv[2]) return c.run(std::vector<std::string>{"--help"});
    std::fprintf(stderr, "topocoll help: unknown command '%s'\n\n", argv[2]);
    print_usage(stderr);
    return 2;
  }
  if (name == "--version" || name == "version") {
    std::printf("topocoll %s\n", topocoll::config::version());
    return 0;
  }
  std::vector<std::string> args = split_flag_values({argv + 2, argv + argc});
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    try {
      refuse_repeated_flags(args, c.repeatable, c.synonyms);
      return c.run(args);
    } catch (const std::invalid_argument& e) {  // the command line asks for what cannot be: bad usage
      std::fprintf(stderr, "topocoll %s: %s\n", name.c_str(), e.what());
      return 2;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "topocoll %s: out of memory (a size, topology or plan larger than this machine holds)\n",
                   name.c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "topocoll %s: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "topocoll: unknown command '%s'\n\n", name.c_str());
  print_usage(stderr);
  return 2;
}
