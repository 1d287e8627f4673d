# Man pages for `cmake --install`: every *.1, *.3, *.8 beside its program
# (tools/<prog>/, src/) or in docs/man, into <mandir>/man<section>. bench/ is
# left out: its programs are installed only by the .deb (packaging.cmake,
# which ships every page). tests/man checks each page against --help.
foreach(dir tools src docs)
  file(GLOB_RECURSE pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.[138])
  foreach(page ${pages})
    string(REGEX REPLACE ".*\\.([138])$" "\\1" sect ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sect})
  endforeach()
endforeach()
