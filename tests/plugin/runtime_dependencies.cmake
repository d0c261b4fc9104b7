# ctest -P script: the built plugin must not need libcudart.so at load time. NCCL loads
# libnccl-topocoll.so as a net/tuner plugin with dlopen and silently skips it when a
# dependency is missing, so a CUDA 12 machine (libcudart.so.12 only) would lose it if it
# named the CUDA 13 runtime; the runtime is linked statically, as libnccl itself does.
# Nor may its runpath hold an empty entry (the loader reads it as the current directory, so a
# preloaded library would take a libnccl.so.2 from wherever the job runs) or a relative one.
# Usage: cmake -DPLUGIN=<path> -DREADELF=<readelf> -P runtime_dependencies.cmake
execute_process(COMMAND ${READELF} -d ${PLUGIN} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${PLUGIN} failed (${rc})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed "${dynamic}")
message(STATUS "NEEDED of ${PLUGIN}:\n${needed}")
foreach(line ${needed})
  if(line MATCHES "libcudart\\.so")
    message(FATAL_ERROR "${PLUGIN} needs the shared CUDA runtime: ${line}")
  endif()
endforeach()
string(REGEX MATCH "\\((RUNPATH|RPATH)\\)[^[]*\\[([^]]*)\\]" runpath_line "${dynamic}")
if(runpath_line)
  set(runpath "${CMAKE_MATCH_2}")
  message(STATUS "runpath of ${PLUGIN}: [${runpath}]")
  if(runpath MATCHES "^:|::|:$" OR runpath STREQUAL "")
    message(FATAL_ERROR "${PLUGIN}'s runpath [${runpath}] has an empty entry (the current directory)")
  endif()
  string(REPLACE ":" ";" entries "${runpath}")
  foreach(entry ${entries})
    if(NOT entry MATCHES "^/" AND NOT entry MATCHES "^\\$ORIGIN")
      message(FATAL_ERROR "${PLUGIN}'s runpath [${runpath}] has a relative entry: ${entry}")
    endif()
  endforeach()
endif()
