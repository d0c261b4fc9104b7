# ctest -P script: the built plugin must not need libcudart.so at load time. NCCL loads
# libnccl-topocoll.so as a net/tuner plugin with dlopen and silently skips it when a
# dependency is missing, so a CUDA 12 machine (libcudart.so.12 only) would lose it if it
# named the CUDA 13 runtime; the runtime is linked statically, as libnccl itself does.
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
