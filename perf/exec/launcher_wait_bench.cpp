// What the rank launcher (exec/local_launcher.h) costs while its ranks run: N ranks of
// `sleep S`, and the launcher's own CPU time and voluntary context switches (its wake-ups)
// over the job. The launcher runs beside the ranks a benchmark measures, so its wake-ups are
// taken from them.
//   launcher_wait_bench [--ranks N] [--seconds S] [--json FILE]
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/local_launcher.h"

namespace {

double cpu_ms(const rusage& u) {
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 16;
  int seconds = 3;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ranks") ranks = std::stoi(value);
    else if (flag == "--seconds") seconds = std::stoi(value);
    else if (flag == "--json") json_path = value;
    else {
      std::fprintf(stderr, "usage: launcher_wait_bench [--ranks N] [--seconds S] [--json FILE]\n");
      return 2;
    }
  }
  topocoll::exec::LaunchOptions options;
  options.serve_bootstrap = false;
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const int rc = topocoll::exec::launch_local_group("/bin/sleep", {std::to_string(seconds)}, ranks, options);
  getrusage(RUSAGE_SELF, &after);
  const double cpu = cpu_ms(after) - cpu_ms(before);
  const long wakeups = after.ru_nvcsw - before.ru_nvcsw;
  std::printf("ranks  seconds  exit  launcher_cpu_ms  voluntary_switches\n%5d  %7d  %4d  %15.1f  %18ld\n", ranks,
              seconds, rc, cpu, wakeups);
  if (!json_path.empty()) {
    nlohmann::json j{{"benchmark", "launcher_wait_bench"}, {"ranks", ranks}, {"seconds", seconds}, {"exit", rc},
                     {"launcher_cpu_ms", cpu}, {"voluntary_switches", wakeups}};
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  return rc;
}
