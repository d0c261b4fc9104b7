// `topocoll fabric` verbs that live apart from tools/cmd_fabric.cpp, one concept a file:
// starting unmodified (NCCL) programs on a fabric (tools/cmd_fabric_job.cpp) and predicting
// what their collectives take there (tools/cmd_fabric_predict.cpp). `args` follows the verb.
#pragma once

#include <span>
#include <string>

namespace topocoll::cli {

int fabric_place(std::span<const std::string> args);
int fabric_rank_exec(std::span<const std::string> args);
int fabric_run(std::span<const std::string> args);
int fabric_predict(std::span<const std::string> args);

extern const char* const kFabricJobUsage;
extern const char* const kFabricPredictUsage;

}  // namespace topocoll::cli
