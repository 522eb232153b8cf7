# xgrammar's C++ core (Apache-2.0), the engine behind constrained decoding (src/grammar/): a static
# library built from the pinned source that scripts/fetch-xgrammar.sh unpacks. Only src/grammar/
# includes its headers; they come in as SYSTEM includes and its own warnings are silenced (its
# build's -Werror and -flto are left out: they are its CI's choices, not a need of the code).

set(STRATA_XGRAMMAR_DIR "$ENV{HOME}/.cache/strata/xgrammar/xgrammar-0.2.8" CACHE PATH
    "xgrammar's unpacked source distribution (scripts/fetch-xgrammar.sh prints it)")

if(NOT EXISTS ${STRATA_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h)
  message(FATAL_ERROR "xgrammar's source is missing at ${STRATA_XGRAMMAR_DIR}. Run:\n"
                      "  scripts/fetch-xgrammar.sh\n"
                      "(or scripts/install-deps.sh), or pass -DSTRATA_XGRAMMAR_DIR=<the directory it prints>.")
endif()

file(GLOB_RECURSE _xgrammar_sources CONFIGURE_DEPENDS ${STRATA_XGRAMMAR_DIR}/cpp/*.cc)
# The Python bindings (nanobind / TVM-FFI) are not part of the core.
list(FILTER _xgrammar_sources EXCLUDE REGEX "/cpp/(tvm_ffi|nanobind)/")

add_library(xgrammar STATIC ${_xgrammar_sources})
set_target_properties(xgrammar PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(xgrammar SYSTEM PUBLIC ${STRATA_XGRAMMAR_DIR}/include ${STRATA_XGRAMMAR_DIR}/3rdparty/picojson
                                                  ${STRATA_XGRAMMAR_DIR}/3rdparty/dlpack/include)
target_compile_definitions(xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0)
# Its own options replace the project's: no warnings, no debug info, and no sanitizer
# instrumentation (sanitized binaries link uninstrumented code fine; strata's own code stays fully
# checked), which halves its build in the sanitizer configurations.
set_property(TARGET xgrammar PROPERTY COMPILE_OPTIONS -w -g0)
target_link_libraries(xgrammar PUBLIC Threads::Threads)
