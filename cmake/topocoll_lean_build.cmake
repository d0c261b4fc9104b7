# What keeps a clean build short on two cores (perf/results/build-time.md).
#
# Precompiled headers: the standard headers most files include and nlohmann/json, parsed once
# per kind of object instead of once per file (perf/results/build-time.md: parsing is about
# 40 % of a typical file's compile here). GCC takes a precompiled header only for objects
# compiled with the same position-independence, so there are two owners: topocoll_pch
# (a library, -fPIC: every library and the CLI's commands) and, in tests/, topocoll_test_pch
# (an executable, -fPIE, with GoogleTest added). TOPOCOLL_PCH=OFF builds without them, which
# also shows a file that forgot an include.
option(TOPOCOLL_PCH "precompile the common headers once per kind of object" ON)

# Unity builds: a target's files are compiled in batches of six, so the headers and template
# instantiations they share are compiled once per batch instead of once per file. Each file
# still reads as its own unit; names in the anonymous namespaces of one target's files must
# differ (the build says which do not), and helpers two files need are shared instead. The
# CLI's commands opt out: each defines its own kUsage and parse_args by design. So does the
# CUDA library (kernels/CMakeLists.txt): newer CMake versions batch .cu files too and 3.25
# does not, so a clash there would show on newer machines alone.
option(TOPOCOLL_UNITY "compile each library's and test binary's files in batches" ON)
set(TOPOCOLL_UNITY_BATCH 6)

set(TOPOCOLL_PCH_HEADERS
  <algorithm> <array> <atomic> <chrono> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
  <fstream> <functional> <map> <memory> <mutex> <numeric> <optional> <random> <set> <sstream>
  <stdexcept> <string> <string_view> <thread> <unordered_map> <utility> <vector>
  <nlohmann/json.hpp>)

if(TOPOCOLL_PCH)
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/topocoll_pch_anchor.cpp
       CONTENT "// The target that owns the libraries' precompiled header (cmake/topocoll_lean_build.cmake).\n")
  add_library(topocoll_pch STATIC ${PROJECT_BINARY_DIR}/topocoll_pch_anchor.cpp)
  target_link_libraries(topocoll_pch PRIVATE nlohmann_json::nlohmann_json)
  target_precompile_headers(topocoll_pch PRIVATE ${TOPOCOLL_PCH_HEADERS})
endif()

# topocoll_lean_build(DIR): every C++ library target defined in DIR and its subdirectories
# (static, shared and object libraries; executables are -fPIE and keep their own header)
# reuses topocoll_pch and, unless it set UNITY_BUILD itself, is built in batches.
function(topocoll_lean_build dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC|SHARED|MODULE|OBJECT)_LIBRARY$" OR target STREQUAL "topocoll_pch")
      continue()
    endif()
    if(TOPOCOLL_PCH)
      target_precompile_headers(${target} REUSE_FROM topocoll_pch)
      target_link_libraries(${target} PRIVATE nlohmann_json::nlohmann_json)
    endif()
    get_target_property(unity ${target} UNITY_BUILD)
    if(TOPOCOLL_UNITY AND unity STREQUAL "unity-NOTFOUND")
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${TOPOCOLL_UNITY_BATCH})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir ${subdirs})
    topocoll_lean_build(${subdir})
  endforeach()
endfunction()
