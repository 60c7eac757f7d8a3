# fuse_precompiled_prelude(TARGET PRELUDE CONTENT FLAGS...): writes the header PRELUDE with
# CONTENT and adds TARGET (built by default), which precompiles it with the C++ compiler and
# FLAGS into PRELUDE.gch, again whenever a header of include/fuse changes. A compile that takes
# `-include PRELUDE` with the very same flags reads the .gch; where it does not fit (other
# flags), GCC reads the prelude's text instead: slower, not wrong. For GCC.
function(fuse_precompiled_prelude target prelude content)
  file(CONFIGURE OUTPUT "${prelude}" CONTENT "${content}")
  file(GLOB_RECURSE _headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/fuse/*.hpp)
  add_custom_command(OUTPUT "${prelude}.gch"
    COMMAND ${CMAKE_CXX_COMPILER} ${ARGN} -x c++-header "${prelude}" -o "${prelude}.gch"
    DEPENDS ${_headers} VERBATIM
    COMMENT "Precompiling ${prelude}")
  add_custom_target(${target} ALL DEPENDS "${prelude}.gch")
endfunction()
