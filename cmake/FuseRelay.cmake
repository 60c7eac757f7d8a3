# fuse_relay_generate(TARGET tgt RELAY model.relay NAMESPACE ns [HEADER name.hpp]
#                     [OPTIONS --qnn-rounding TONEAREST --planner tvm --target cuda ...])
#
# Generates, at build time, the header of fused kernels of a Relay model (`fuse-relay compile`)
# and adds it to the target: `#include "<HEADER>"` (default: the model's file name with .hpp, or
# .cuh with --target cuda), then `ns::model m; m(inputs..., outputs...);` (for CUDA: `ns::model
# m(stream); m.run(inputs..., outputs..., stream);`, docs/cuda.md). The header is rebuilt when the
# model or the frontend changes. OPTIONS are passed to `fuse-relay compile` as they are
# (--planner, --target, --qnn-rounding, --qnn-compute-dtype). Needs the `fuse-relay` target
# (FUSE_BUILD_TOOLS=ON).
function(fuse_relay_generate)
  cmake_parse_arguments(FR "" "TARGET;RELAY;NAMESPACE;HEADER" "OPTIONS" ${ARGN})
  foreach(arg TARGET RELAY NAMESPACE)
    if(NOT FR_${arg})
      message(FATAL_ERROR "fuse_relay_generate: ${arg} is required")
    endif()
  endforeach()
  if(FR_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fuse_relay_generate: unexpected arguments ${FR_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET fuse-relay)
    message(FATAL_ERROR "fuse_relay_generate: the fuse-relay tool is not built (FUSE_BUILD_TOOLS=OFF?)")
  endif()
  get_filename_component(relay "${FR_RELAY}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT FR_HEADER)
    get_filename_component(FR_HEADER "${relay}" NAME_WE)
    set(_ext .hpp)
    list(FIND FR_OPTIONS cuda _cuda_at)
    if(_cuda_at GREATER 0)
      math(EXPR _before "${_cuda_at} - 1")
      list(GET FR_OPTIONS ${_before} _option)
      if(_option STREQUAL "--target")
        set(_ext .cuh)
      endif()
    endif()
    set(FR_HEADER "${FR_HEADER}${_ext}")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/fuse_relay_generated/${FR_TARGET}")
  set(out "${dir}/${FR_HEADER}")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND fuse-relay compile "${relay}" -o "${out}" --namespace "${FR_NAMESPACE}" --report ${FR_OPTIONS}
    DEPENDS "${relay}" fuse-relay
    COMMENT "fuse-relay: ${FR_RELAY} -> ${FR_HEADER}"
    VERBATIM)
  target_sources(${FR_TARGET} PRIVATE "${out}")
  target_include_directories(${FR_TARGET} PRIVATE "${dir}")
endfunction()
