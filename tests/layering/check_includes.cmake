# The layering test: every #include under src/ and include/spattn/ must point down the allowed
# order, so that a layer never reads one above it (docs/architecture.md: dependencies run one way).
#
#   cmake -DSOURCE_DIR=<repository root> -P tests/layering/check_includes.cmake
#
# A file in room A may include room B when A == B or B's rank is lower than A's. Rooms of equal
# rank are independent and may not include each other. The schedules' own rooms are ordered the
# same way inside src/schedules. A public header <spattn/X.hpp> belongs to the room named for it
# below (the lowest layer that may read it); its own includes obey the same order. Exits non-zero
# listing every include against the order.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layering: pass -DSOURCE_DIR=<repository root>")
endif()

# src/<room>: the order, lowest first.
set(rank_types 0)       # the shared vocabulary: passes, algorithms, element and input types
set(rank_io 1)
set(rank_cpu 2)
set(rank_schedules 3)
set(rank_reference 3)   # the fp64 oracle: independent of the schedules
set(rank_mask 4)        # the prepared mask and its cached structures
set(rank_plan 5)        # where choices are made (docs/architecture.md)
set(rank_device 6)      # host planning of the CUDA tiles, from the planner's flash tiles
set(rank_api 7)
set(rank_cuda 7)
set(rank_version.cpp 8)
# include/spattn/<header>: its room.
set(header_types.hpp types)
set(header_elements.hpp types)
set(header_inputs.hpp types)
set(header_tensor.hpp types)
set(header_error.hpp types)
set(header_io.hpp io)
set(header_io_inline.hpp io)
set(header_reference.hpp reference)
set(header_mask.hpp mask)
set(header_shard.hpp mask)
set(header_device_run.hpp device)
set(header_bounds.hpp plan)
set(header_plan.hpp plan)
set(header_paper.hpp plan)
set(header_attention.hpp api)
set(header_sparse_inputs.hpp api)
set(header_cuda.hpp cuda)
set(header_version.hpp version.cpp)
# src/schedules/<room>.
set(srank_common 0)
set(srank_flash 1)
set(srank_small_cache 1)
set(srank_sparse_small_cache 2)
set(srank_csr_inputs 3)
set(srank_paper_task 3)
# src/cpu/<room> (files directly in src/cpu are the room "cpu").
set(crank_kernels 0)
set(crank_cpu 1)

function(room_of path out_room out_sub)
  string(REGEX MATCH "^([^/]+)(/([^/]+)/)?" match "${path}")
  set(room "${CMAKE_MATCH_1}")
  set(sub "")
  if(CMAKE_MATCH_3)
    set(sub "${CMAKE_MATCH_3}")
  endif()
  set(${out_room} "${room}" PARENT_SCOPE)
  set(${out_sub} "${sub}" PARENT_SCOPE)
endfunction()

# Appends to `violations` (in the caller) when room `to` (sub-room to_sub) lies above room `from`.
macro(check_rooms where from from_sub to to_sub target)
  if(NOT DEFINED rank_${to})
    list(APPEND violations "${where}: includes \"${target}\" from room '${to}', which has no place in the order")
  elseif(NOT "${from}" STREQUAL "${to}")
    if(NOT rank_${to} LESS rank_${from})
      list(APPEND violations "${where} (${from}, rank ${rank_${from}}) includes \"${target}\" (${to}, rank ${rank_${to}})")
    endif()
  elseif("${from}" STREQUAL "schedules" AND NOT "${from_sub}" STREQUAL "${to_sub}")
    if(NOT srank_${to_sub} LESS srank_${from_sub})
      list(APPEND violations "${where} (schedules/${from_sub}) includes \"${target}\" (schedules/${to_sub}): against the schedules' order")
    endif()
  elseif("${from}" STREQUAL "cpu")
    set(a "${from_sub}")
    set(b "${to_sub}")
    if(a STREQUAL "" OR a MATCHES "\\.")
      set(a cpu)
    endif()
    if(b STREQUAL "" OR b MATCHES "\\.")
      set(b cpu)
    endif()
    if(NOT a STREQUAL b AND NOT crank_${b} LESS crank_${a})
      list(APPEND violations "${where} (cpu/${a}) includes \"${target}\" (cpu/${b}): the kernels are below the workers")
    endif()
  endif()
endmacro()

# Checks the <spattn/...> includes of `path` (read from `file_path`) against room `from`.
macro(check_public_includes where file_path from)
  file(STRINGS "${file_path}" public_lines REGEX "^[ \t]*#[ \t]*include[ \t]+<spattn/")
  foreach(line IN LISTS public_lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+<spattn/([^>]+)>.*" "\\1" header "${line}")
    math(EXPR checked "${checked} + 1")
    if(NOT DEFINED header_${header})
      list(APPEND violations "${where}: includes <spattn/${header}>, which has no room (add it to check_includes.cmake)")
    else()
      check_rooms("${where}" "${from}" "" "${header_${header}}" "" "<spattn/${header}>")
    endif()
  endforeach()
endmacro()

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}/src"
     "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/src/*.hpp" "${SOURCE_DIR}/src/*.cu" "${SOURCE_DIR}/src/*.cuh")
set(violations "")
set(checked 0)
foreach(file IN LISTS files)
  room_of("${file}" from from_sub)
  if(NOT DEFINED rank_${from})
    list(APPEND violations "src/${file}: room '${from}' has no place in the order (add it to check_includes.cmake)")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/src/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" target "${line}")
    if(NOT EXISTS "${SOURCE_DIR}/src/${target}")
      continue()  # a header next to the file or outside src (the CUDA toolkit's): not a layer
    endif()
    math(EXPR checked "${checked} + 1")
    room_of("${target}" to to_sub)
    check_rooms("src/${file}" "${from}" "${from_sub}" "${to}" "${to_sub}" "${target}")
  endforeach()
  check_public_includes("src/${file}" "${SOURCE_DIR}/src/${file}" "${from}")
endforeach()

file(GLOB headers RELATIVE "${SOURCE_DIR}/include/spattn" "${SOURCE_DIR}/include/spattn/*.hpp")
foreach(header IN LISTS headers)
  if(NOT DEFINED header_${header})
    list(APPEND violations "include/spattn/${header} has no room (add it to check_includes.cmake)")
    continue()
  endif()
  check_public_includes("include/spattn/${header}" "${SOURCE_DIR}/include/spattn/${header}" "${header_${header}}")
endforeach()
list(APPEND files ${headers})

list(LENGTH files num_files)
list(LENGTH violations num_violations)
if(num_violations GREATER 0)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering: ${num_violations} include(s) against the order:\n  ${text}")
endif()
message(STATUS "layering: ${checked} includes in ${num_files} files, all pointing down")
