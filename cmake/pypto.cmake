# Shared compile options and helpers for pypto-serving targets.
set(PYPTO_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# CI builds with -DPYPTO_WERROR=ON (scripts/test.sh under CI=true): a new warning fails the run.
option(PYPTO_WERROR "treat the project's compiler warnings as errors" OFF)
if(PYPTO_WERROR)
  list(APPEND PYPTO_WARNINGS -Werror)
endif()

if(PYPTO_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PYPTO_BUILD_FUZZERS needs clang (CXX=clang++)")
  endif()
  # Coverage instrumentation for the libraries under test; the fuzzers link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
  # The grammar compiler's work limits divided for sanitized fuzzing (structured/fuzz_limits.h).
  add_compile_definitions(PYPTO_FUZZ_LIMITS)
endif()

if(PYPTO_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# pypto_library(NAME DEPS...) : one static library per src/ folder, sources globbed from it.
function(pypto_library name)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(${name} STATIC ${_srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${PYPTO_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARGN})
endfunction()

# pypto_test_suite(NAME DIR DEPS...) : one GoogleTest binary from DIR/*.cpp (relative to the
# calling CMakeLists.txt), registered with CTest, labelled with the suite's folder name.
function(pypto_test_suite name dir)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  add_executable(${name} ${_srcs})
  target_link_libraries(${name} PRIVATE ${ARGN} GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE
    PYPTO_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PYPTO_BINARY_DIR="${PROJECT_BINARY_DIR}")
  get_filename_component(_label ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  gtest_discover_tests(${name} PROPERTIES LABELS ${_label} DISCOVERY_TIMEOUT 60)
endfunction()
