# Decides whether the CUDA backend is built. AUTO enables it when a CUDA compiler is found
# (/usr/local/cuda/bin/nvcc is tried when nvcc is not on PATH); ON requires it; OFF skips it.
set(SPATTN_HAVE_CUDA OFF)
if(NOT SPATTN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100 and H100/H200; few, so CI stays fast
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(SPATTN_HAVE_CUDA ON)
  elseif(SPATTN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPATTN_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit "
                        "or configure with -DSPATTN_CUDA=OFF")
  endif()
endif()
