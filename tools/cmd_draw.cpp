// `topocoll draw FILE -o out.png|out.svg|out.pdf|out.dot`: a Graphviz picture of a topology.
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "config/user_files.h"
#include "exec/private_conversion.h"
#include "tools/flag_value.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "topo/topology_dot.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll draw FILE -o OUT     (or --topo FILE)\n"
    "\n"
    "Draws a topology with Graphviz. The format follows OUT's extension: .png, .svg, .pdf\n"
    "(needs Graphviz's `dot` and `neato` on PATH) or .dot/.gv (the DOT text itself).\n"
    "BiGraph: upper and lower switch groups as two rows, endpoints above and below.\n"
    "NAP: packages as boxes on their torus grid, nodes over their local switches; a red edge\n"
    "stands for the N torus cables joining node i to node i of neighbouring packages.\n";

int run_draw(std::span<const std::string> given) {
  const std::vector<std::string> words = topo_flag_as_word(given);  // --topo FILE too
  const std::span<const std::string> args(words);
  std::string file, output;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "topocoll draw: %s needs a file\n\n%s", a.c_str(), kUsage);
        return 2;
      }
      output = args[++i];
    } else if ((a.size() > 1 && a[0] == '-') || !file.empty()) {
      std::fprintf(stderr, "topocoll draw: unexpected argument %s\n\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      file = a;
    }
  }
  if (file.empty() || output.empty()) {
    std::fprintf(stderr, "topocoll draw: %s\n\n%s", file.empty() ? "no topology FILE given" : "-o OUT is required",
                 kUsage);
    return 2;
  }
  const auto dot_at = output.rfind('.');
  std::string format = dot_at == std::string::npos ? "" : output.substr(dot_at + 1);
  for (char& c : format) c = char(std::tolower(static_cast<unsigned char>(c)));  // X.SVG is an SVG
  if (format != "png" && format != "svg" && format != "pdf" && format != "dot" && format != "gv") {
    std::fprintf(stderr, "topocoll draw: cannot tell the format of %s (use .png, .svg, .pdf or .dot)\n",
                 output.c_str());
    return 2;
  }
  try {
    config::check_replaceable(output);  // before a layout that may take minutes
  } catch (const config::UserFileError& e) {
    std::fprintf(stderr, "topocoll draw: %s\n", e.what());
    return 1;
  }
  topo::Topology t = load_topology_argument(file);
  // Graphviz's layout time grows much faster than the node count: past this a drawing takes
  // minutes to hours and says nothing a person can read. Refuse up front.
  constexpr size_t kMaxDrawnNodes = 4096;
  const size_t nodes = t.endpoints().size() + t.switches().size();
  if (nodes > kMaxDrawnNodes) {
    std::fprintf(stderr,
                 "topocoll draw: %s has %zu nodes (%zu endpoints, %zu switches), more than the %zu "
                 "a drawing may have; `topocoll describe` summarises it\n",
                 file.c_str(), nodes, t.endpoints().size(), t.switches().size(), kMaxDrawnNodes);
    return 1;
  }
  topo::DotDrawing drawing = topo::topology_to_dot(t);
  const bool text_only = format == "dot" || format == "gv";
  std::string picture = drawing.dot;
  if (!text_only) {
    std::vector<std::string> command = drawing.engine;
    command.insert(command.end(), {"-T" + format, "-o", "{out}", "{in}"});
    const exec::Conversion drawn =
        exec::convert_privately(drawing.dot, "dot", format, {command}, "Graphviz's " + drawing.engine[0],
                                /*show_errors=*/true);
    if (!drawn.succeeded()) {
      std::fprintf(stderr, "topocoll draw: %s; is Graphviz installed?\n", drawn.failure.c_str());
      return 1;
    }
    picture = drawn.output;
  }
  try {
    config::replace_file(output, picture);
  } catch (const config::UserFileError& e) {
    std::fprintf(stderr, "topocoll draw: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", output.c_str());
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("draw", "draw a topology with Graphviz (png, svg, pdf or dot)", run_draw, "", "-o --output");

}  // namespace topocoll::cli
