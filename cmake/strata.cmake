# Project-wide compile flags and the strata_component() helper.

# C and C++ only: nvcc takes its host flags through -Xcompiler (kernels/cuda).
set(_warn -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -fno-strict-aliasing)
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_warn}>")
if(STRATA_NATIVE)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-march=native>")
endif()

if(STRATA_SANITIZE)
  if(STRATA_SANITIZE STREQUAL "thread")
    set(_san_flags -fsanitize=thread)
  else()
    set(_san_flags -fsanitize=${STRATA_SANITIZE} -fno-sanitize-recover=all)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_san_flags};-fno-omit-frame-pointer>")
  # GCC places vzeroupper after AVX code only under -fexpensive-optimizations (on from -O2): at the
  # -O1 below, every AVX-512 kernel returned with the upper halves of the vector registers dirty,
  # and the SSE code after it (the sampler's exponentials, libm) ran some 10x slower on Intel CPUs
  # (a 32k-vocabulary draw took 7.6 ms under ASan instead of 0.3 ms), enough to time e2e tests out.
  add_compile_options("$<$<COMPILE_LANG_AND_ID:CXX,GNU>:-fexpensive-optimizations>" "$<$<COMPILE_LANG_AND_ID:C,GNU>:-fexpensive-optimizations>")
  add_link_options(${_san_flags})
  add_compile_definitions(STRATA_SANITIZED=1)
  # -O1 with line tables only: sanitizer reports keep file and line, and the Beast-heavy files
  # compile in half the time of -O2 -g (the CI builds everything twice on two cores).
  set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
endif()

set(STRATA_ROOT ${CMAKE_SOURCE_DIR})
set(STRATA_SHARED_DIR ${CMAKE_SOURCE_DIR}/../shared CACHE PATH "The shared models, vocabularies, goldens and templates")
# The Python of the tests and tools: the project's virtual environment (scripts/install-deps.sh).
set(STRATA_PYTHON ${STRATA_ROOT}/.venv/bin/python)

# strata_component(NAME [DEPS libs...] [TEST_DEPS libs...] [LABELS labels...])
#
# Builds the .cpp files of the calling folder (not its *.test.cpp) into the static library
# strata_<NAME>, and its *.test.cpp files into one GoogleTest executable strata_<NAME>_tests
# registered with CTest under the given labels ("tsan" marks tests that CI also runs under
# ThreadSanitizer).
function(strata_component name)
  cmake_parse_arguments(A "" "" "DEPS;TEST_DEPS;LABELS;SOURCES" ${ARGN})
  file(GLOB _all CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  foreach(_extra IN LISTS A_SOURCES)
    file(GLOB _more CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${_extra})
    list(APPEND _all ${_more})
  endforeach()
  set(_srcs ${_all})
  set(_tests ${_all})
  list(FILTER _srcs EXCLUDE REGEX "\\.test\\.cpp$")
  list(FILTER _tests INCLUDE REGEX "\\.test\\.cpp$")
  if(_srcs)
    add_library(strata_${name} STATIC ${_srcs})
    target_include_directories(strata_${name} PUBLIC ${STRATA_ROOT})
    target_link_libraries(strata_${name} PUBLIC ${A_DEPS})
  else()
    add_library(strata_${name} INTERFACE)
    target_include_directories(strata_${name} INTERFACE ${STRATA_ROOT})
    target_link_libraries(strata_${name} INTERFACE ${A_DEPS})
  endif()
  if(STRATA_TESTS AND _tests)
    add_executable(strata_${name}_tests ${_tests})
    target_link_libraries(strata_${name}_tests PRIVATE strata_${name} ${A_TEST_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
    target_compile_definitions(strata_${name}_tests PRIVATE STRATA_SHARED_DIR="${STRATA_SHARED_DIR}")
    add_test(NAME ${name} COMMAND strata_${name}_tests --gtest_brief=1 WORKING_DIRECTORY ${STRATA_ROOT})
    set_tests_properties(${name} PROPERTIES LABELS "unit;${A_LABELS}" TIMEOUT 600)
    if("tsan" IN_LIST A_LABELS)
      set_property(GLOBAL APPEND PROPERTY STRATA_TSAN_TARGETS strata_${name}_tests)
    endif()
  endif()
endfunction()
