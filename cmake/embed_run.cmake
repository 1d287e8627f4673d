# Script mode helper for dlock_embed_files(): writes OUT from FILES: each
# file's bytes (NUL-terminated, internal) and a dlock__script named
# <PREFIX>_<basename> with its length and SHA1 (what EVALSHA names),
# computed here, at build time.
set(body "/* Generated from .lua sources by cmake/embed_run.cmake; do not edit. */\n#include \"script.h\"\n")
string(REPLACE " " ";" FILES "${FILES}")
set(i 0)
foreach(f ${FILES})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} hex HEX)
  file(SHA1 ${f} sha)
  file(SIZE ${f} len)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(APPEND body "static const unsigned char src_${i}[] = {${hex}0x00};\n")
  string(APPEND body "const dlock__script ${PREFIX}_${name} = {\"${name}\", (const char *)src_${i}, ${len}u, \"${sha}\"};\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE ${OUT} "${body}")
