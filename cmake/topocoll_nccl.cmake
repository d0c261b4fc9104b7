# Finds NCCL's header and library and makes `topocoll_nccl_headers`, an interface target with
# nccl.h's directory and the CUDA headers nccl.h includes (cuda_runtime.h, cuda_fp16.h):
# NCCL's header need not sit inside the CUDA toolkit (Ubuntu's libnccl-dev puts it in
# /usr/include, the nvidia-nccl wheel in site-packages), so every target that includes
# nccl.h links this target instead of naming an include directory.
#
# Looked for, first found wins (NCCL_INCLUDE_DIR / NCCL_LIBRARY given on the command line
# win over all):
#   1. NCCL_HOME (a CMake variable or the environment): include/ and lib/ or lib64/
#   2. the CUDA toolkit (CUDAToolkit_ROOT, default /usr/local/cuda)
#   3. the system's default paths (/usr/include, /usr/lib/x86_64-linux-gnu, ...)
#   4. the nvidia-nccl wheel of the Python on PATH (what PyTorch loads)
# The configure step prints which one it took and the version in its nccl.h.

set(_nccl_home "${NCCL_HOME}")
if(NOT _nccl_home AND DEFINED ENV{NCCL_HOME})
  set(_nccl_home "$ENV{NCCL_HOME}")
endif()

set(_nccl_wheel "")
find_program(TOPOCOLL_PYTHON NAMES python3 python)
if(TOPOCOLL_PYTHON)
  execute_process(
    COMMAND ${TOPOCOLL_PYTHON} -c
      "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')"
    OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()

set(TOPOCOLL_NCCL_SOURCE "given (NCCL_INCLUDE_DIR)")
if(NOT NCCL_INCLUDE_DIR)
  foreach(_source home toolkit system wheel)
    if(_source STREQUAL "home" AND _nccl_home)
      find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_nccl_home}/include NO_DEFAULT_PATH)
      set(_libdirs ${_nccl_home}/lib ${_nccl_home}/lib64)
      set(TOPOCOLL_NCCL_SOURCE "NCCL_HOME (${_nccl_home})")
    elseif(_source STREQUAL "toolkit" AND CUDAToolkit_ROOT)
      find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${CUDAToolkit_ROOT}/include NO_DEFAULT_PATH)
      set(_libdirs ${CUDAToolkit_ROOT}/lib64 ${CUDAToolkit_ROOT}/lib)
      set(TOPOCOLL_NCCL_SOURCE "the CUDA toolkit (${CUDAToolkit_ROOT})")
    elseif(_source STREQUAL "system")
      find_path(NCCL_INCLUDE_DIR nccl.h)
      set(_libdirs "")
      set(TOPOCOLL_NCCL_SOURCE "the system")
    elseif(_source STREQUAL "wheel" AND _nccl_wheel)
      find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_nccl_wheel}/include NO_DEFAULT_PATH)
      set(_libdirs ${_nccl_wheel}/lib)
      set(TOPOCOLL_NCCL_SOURCE "the nvidia-nccl Python wheel (${_nccl_wheel})")
    endif()
    if(NCCL_INCLUDE_DIR)
      break()
    endif()
  endforeach()
endif()

# The wheel ships libnccl.so.2 only (no development symlink).
if(NOT NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
  if(_libdirs)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS ${_libdirs} NO_DEFAULT_PATH)
  endif()
  if(NOT NCCL_LIBRARY)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2)
  endif()
endif()

set(TOPOCOLL_NCCL_VERSION "")
if(NCCL_INCLUDE_DIR AND EXISTS ${NCCL_INCLUDE_DIR}/nccl.h)
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} ([0-9]+)" _match "${_nccl_version_lines}")
    set(_nccl_${_part} ${CMAKE_MATCH_1})
  endforeach()
  set(TOPOCOLL_NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

# nccl.h includes the CUDA runtime's headers.
find_package(CUDAToolkit QUIET)
add_library(topocoll_nccl_headers INTERFACE)
if(NCCL_INCLUDE_DIR)
  target_include_directories(topocoll_nccl_headers INTERFACE ${NCCL_INCLUDE_DIR})
  message(STATUS "topocoll: NCCL ${TOPOCOLL_NCCL_VERSION} from ${TOPOCOLL_NCCL_SOURCE}: "
                 "${NCCL_INCLUDE_DIR}/nccl.h, ${NCCL_LIBRARY}")
else()
  message(WARNING "topocoll: no nccl.h in NCCL_HOME, the CUDA toolkit, the system or an nvidia-nccl "
                  "wheel; set NCCL_HOME (or NCCL_INCLUDE_DIR and NCCL_LIBRARY)")
endif()
if(CUDAToolkit_INCLUDE_DIRS)
  target_include_directories(topocoll_nccl_headers INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
endif()
