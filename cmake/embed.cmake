# dlock_embed_files(OUT_C_FILE SYMBOL_PREFIX file...)
# Generates a C source holding, for each file, a dlock__script (script.h)
# named <prefix>_<basename>: its bytes, length and SHA1 computed at build
# time, so Lua scripts stay separate, reviewable files (runnable with
# redis-cli --eval) yet ship inside the binary, hashed once.
function(dlock_embed_files out prefix)
  set(files ${ARGN})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DPREFIX=${prefix}
            "-DFILES=${files}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_run.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_run.cmake
    COMMENT "Embedding ${prefix} scripts" VERBATIM)
endfunction()
