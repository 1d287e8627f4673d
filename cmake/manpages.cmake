# Man pages for `cmake --install`: every *.1, *.3, *.8 beside its program
# (tools/<prog>/, src/, bench/dlock-bench/) or in docs/man, into
# <mandir>/man<section>. Of bench/ only dlock-bench is installed (libdlock(3)
# and dlock(1) send readers to it; bench/dlock-bench/CMakeLists.txt); the
# .deb ships every page (packaging.cmake). tests/man checks each page
# against --help.
foreach(dir tools src docs bench/dlock-bench)
  file(GLOB_RECURSE pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.[138])
  foreach(page ${pages})
    string(REGEX REPLACE ".*\\.([138])$" "\\1" sect ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sect})
  endforeach()
endforeach()
