# Fails when a source file includes a floor above its own. The floors, bottom to top:
#   kernels -> src -> io -> actors -> server
# Each may include only its own floor and those below it; only server/ sees all of them.
# Run as: cmake -DROOT=<tree> -P check_floors.cmake   (the build runs it on every build: the
# `floors` target; CTest runs it on this tree and on a planted violation).

set(_floors kernels src io actors server)
if(NOT ROOT)
  message(FATAL_ERROR "check_floors: pass -DROOT=<source tree>")
endif()

set(_violations "")
list(LENGTH _floors _n)
math(EXPR _last "${_n} - 1")
foreach(_i RANGE ${_last})
  list(GET _floors ${_i} _floor)
  file(GLOB_RECURSE _files ${ROOT}/${_floor}/*.cpp ${ROOT}/${_floor}/*.hpp ${ROOT}/${_floor}/*.cu ${ROOT}/${_floor}/*.cuh)
  foreach(_f IN LISTS _files)
    file(STRINGS ${_f} _includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_]+/")
    foreach(_line IN LISTS _includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/.*$" "\\1" _target "${_line}")
      list(FIND _floors ${_target} _j)
      if(_j GREATER _i)
        file(RELATIVE_PATH _rel ${ROOT} ${_f})
        string(STRIP "${_line}" _line)
        string(APPEND _violations "  ${_rel}: ${_line} (${_floor}/ may not include ${_target}/)\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(_violations)
  message(FATAL_ERROR "upward includes across the floors (kernels -> src -> io -> actors -> server):\n${_violations}")
endif()
