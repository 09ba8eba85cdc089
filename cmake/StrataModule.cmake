# strata_module(NAME <name> [DEPS <module>...] [LIBS <target>...] [NO_INCLUDE <module>...]
#               [ONLY_HEADERS <module/header.h>...])
#
# Builds src/<name>/**.cpp into the static library strata_<name>. Files named *_avx2.cpp are
# compiled with AVX2/FMA/F16C enabled, *_avx512.cpp with AVX-512 F/BW/VL/DQ (plus FMA/F16C) and
# *_avx512vnni.cpp with AVX-512 VNNI as well, *_avx512bf16.cpp with AVX-512 BF16 and VNNI; callers dispatch to them at run time
# (kernels/backend.h), so one binary runs on any x86-64 CPU. DEPS are other Strata modules; LIBS
# are third-party targets. At configure time every #include "<module>/..." in the module's sources
# is checked against the transitive closure of DEPS, so a module cannot reach into one it does not
# declare (see docs/architecture.md). NO_INCLUDE names modules that are linked (through DEPS) but
# whose headers the module may not include; ONLY_HEADERS restricts includes of a module to the
# headers listed (the server sees the engine only through engine/engine_client.h).
set(STRATA_ALL_MODULE_NAMES core io tokenizer grammar kernels model kv sched sampling engine net server bench
    plan dist apps)
# With STRATA_FUZZ these modules get libFuzzer's coverage instrumentation: the code the targets in
# tests/fuzz parse input with. The rest (kernels, model, engine ...) is linked uninstrumented for
# coverage (it still has ASan/UBSan), which keeps the unit suites of the same build fast.
set(STRATA_FUZZ_MODULES core io net tokenizer server)

function(strata_module)
  cmake_parse_arguments(M "" "NAME" "DEPS;LIBS;NO_INCLUDE;ONLY_HEADERS" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${dir}/*.h)
  add_library(strata_${M_NAME} STATIC ${sources} ${headers})
  target_include_directories(strata_${M_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  foreach(dep IN LISTS M_DEPS)
    target_link_libraries(strata_${M_NAME} PUBLIC strata_${dep})
  endforeach()
  if(M_LIBS)
    target_link_libraries(strata_${M_NAME} PUBLIC ${M_LIBS})
  endif()
  if(STRATA_FUZZ AND M_NAME IN_LIST STRATA_FUZZ_MODULES)
    target_compile_options(strata_${M_NAME} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  foreach(src IN LISTS sources)
    if(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                                  "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
    elseif(src MATCHES "_avx512vnni\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
    elseif(src MATCHES "_avx512bf16\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni")
    endif()
  endforeach()

  # Transitive closure of allowed modules.
  set(allowed ${M_NAME})
  foreach(dep IN LISTS M_DEPS)
    get_property(dep_closure GLOBAL PROPERTY STRATA_CLOSURE_${dep})
    if(NOT DEFINED dep_closure AND NOT dep STREQUAL "")
      get_property(known GLOBAL PROPERTY STRATA_CLOSURE_${dep} SET)
      if(NOT known)
        message(FATAL_ERROR "module ${M_NAME}: dependency '${dep}' is not defined before it")
      endif()
    endif()
    list(APPEND allowed ${dep} ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY STRATA_CLOSURE_${M_NAME} ${allowed})
  set(visible ${allowed})
  if(M_NO_INCLUDE)
    list(REMOVE_ITEM visible ${M_NO_INCLUDE})
  endif()
  strata_check_includes(${M_NAME} "${visible}" ${sources} ${headers})
  if(M_ONLY_HEADERS)
    strata_check_only_headers(${M_NAME} "${M_ONLY_HEADERS}" ${sources} ${headers})
  endif()
endfunction()

# Fails configuration when a file includes a header of a module named in `only` other than the
# headers listed there.
function(strata_check_only_headers owner only)
  set(restricted)
  foreach(h IN LISTS only)
    string(REGEX REPLACE "/.*" "" m ${h})
    list(APPEND restricted ${m})
  endforeach()
  foreach(file IN LISTS ARGN)
    file(STRINGS ${file} lines REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([a-z_]+/[^\"]*)\".*" "\\1" path ${line})
      string(REGEX REPLACE "/.*" "" inc ${path})
      list(FIND restricted ${inc} is_restricted)
      list(FIND only ${path} ok)
      if(is_restricted GREATER -1 AND ok EQUAL -1)
        message(FATAL_ERROR "${file}: module '${owner}' may include only ${only} from '${inc}/', "
                            "not ${path}; see docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()

# Fails configuration when a file includes a Strata module outside `allowed`.
function(strata_check_includes owner allowed)
  foreach(file IN LISTS ARGN)
    file(STRINGS ${file} lines REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" inc ${line})
      list(FIND STRATA_ALL_MODULE_NAMES ${inc} is_module)
      list(FIND allowed ${inc} ok)
      if(is_module GREATER -1 AND ok EQUAL -1)
        message(FATAL_ERROR "${file}: module '${owner}' may not include '${inc}/' "
                            "(allowed: ${allowed}); see docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()

# strata_test(NAME <exe> SOURCES <files...> DEPS <modules...> [LABELS <labels...>] [TIMEOUT s]
#             [SANITIZE])
# One GoogleTest executable; each test case becomes a CTest test carrying LABELS (default: unit).
# SANITIZE marks the suites a sanitizer build (-DSTRATA_SANITIZE=ON) defines by default: the
# low-level code where memory errors hide, cheap to compile; -DSTRATA_SANITIZE_ALL=ON defines every
# suite there (scripts/test.sh does).
function(strata_test)
  cmake_parse_arguments(T "SANITIZE" "NAME;TIMEOUT" "SOURCES;DEPS;LABELS;LIBS" ${ARGN})
  if(STRATA_SANITIZE AND NOT STRATA_SANITIZE_ALL AND NOT T_SANITIZE)
    return()
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  foreach(dep IN LISTS T_DEPS)
    target_link_libraries(${T_NAME} PRIVATE strata_${dep})
  endforeach()
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest GTest::gtest_main ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${T_NAME} PRIVATE STRATA_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                               STRATA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  # e2e suites drive the `strata` binary: building them builds it.
  if("e2e" IN_LIST T_LABELS)
    add_dependencies(${T_NAME} strata)
  endif()
  # `cmake --build DIR --target strata_unit_tests` builds just what `ctest -L unit` runs.
  if("unit" IN_LIST T_LABELS)
    if(NOT TARGET strata_unit_tests)
      add_custom_target(strata_unit_tests)
    endif()
    add_dependencies(strata_unit_tests ${T_NAME})
  endif()
endfunction()
