# Debian packages built by CPack (`cmake --build build --target package`,
# `make deb`), split the way Debian splits a library and its programs:
#   libdlock1     the shared library
#   libdlock-dev  headers, libdlock.so, libdlock.a, dlock.pc, dlock-static.pc,
#                 CMake package
#   dlock-tools   the dlock command (and dlock-bench)
#   seckill       seckilld, seckill-persist, seckill, seckill-bench, systemd
#                 units, example configuration in /etc/dlock
# Included from the top-level CMakeLists.txt after every target exists. The
# rules below are EXCLUDE_FROM_ALL: `cmake --install` keeps the layout of the
# directories' own rules (prefix-relative), while a package always gets
# Debian's (/usr, multiarch libdir, /etc, /lib/systemd/system), whatever
# prefix the build was configured with. Programs link libdlock statically
# (tools/*), so only libdlock-dev depends on libdlock1; the rest of the
# Depends lines come from dpkg-shlibdeps when it is installed (dpkg-dev).

set(DLOCK_DEB_RELEASE 1)
set(DLOCK_DEB_VERSION ${PROJECT_VERSION}-${DLOCK_DEB_RELEASE})
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(deb_libdir lib/${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(deb_libdir lib)
endif()
set(deb_gen ${PROJECT_BINARY_DIR}/deb-files)
set(deb_unitdir /lib/systemd/system)

# --- libdlock1 / libdlock-dev ------------------------------------------------
install(TARGETS dlock dlock_static EXPORT dlockDebTargets
        LIBRARY DESTINATION ${deb_libdir} COMPONENT lib NAMELINK_COMPONENT dev EXCLUDE_FROM_ALL
        ARCHIVE DESTINATION ${deb_libdir} COMPONENT dev EXCLUDE_FROM_ALL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dlock DESTINATION include
        COMPONENT dev EXCLUDE_FROM_ALL)
install(EXPORT dlockDebTargets FILE dlockTargets.cmake NAMESPACE dlock::
        DESTINATION ${deb_libdir}/cmake/dlock COMPONENT dev EXCLUDE_FROM_ALL)

# dlock.pc and dlockConfig.cmake from the same templates as the top level's,
# for the package's libdir (the .pc finds its prefix relative to itself).
function(dlock_deb_package_files)
  set(CMAKE_INSTALL_LIBDIR ${deb_libdir})
  set(CMAKE_INSTALL_INCLUDEDIR include)
  file(RELATIVE_PATH DLOCK_PC_TO_PREFIX "/p/${deb_libdir}/pkgconfig" "/p")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${deb_gen}/dlock.pc @ONLY)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock-static.pc.in ${deb_gen}/dlock-static.pc @ONLY)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dlockConfig.cmake.in
    ${deb_gen}/dlockConfig.cmake INSTALL_DESTINATION ${deb_libdir}/cmake/dlock)
endfunction()
dlock_deb_package_files()
install(FILES ${deb_gen}/dlock.pc ${deb_gen}/dlock-static.pc DESTINATION ${deb_libdir}/pkgconfig
        COMPONENT dev EXCLUDE_FROM_ALL)
install(FILES ${deb_gen}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
        DESTINATION ${deb_libdir}/cmake/dlock COMPONENT dev EXCLUDE_FROM_ALL)

# --- programs, by target name ---------------------------------------------------
foreach(spec dlock_cli:tools dlock-bench:tools seckilld:seckill seckill-persist:seckill
             seckill_admin:seckill seckill-bench:seckill)
  string(REPLACE ":" ";" spec "${spec}")
  list(GET spec 0 tgt)
  list(GET spec 1 comp)
  if(TARGET ${tgt})
    install(TARGETS ${tgt} RUNTIME DESTINATION bin COMPONENT ${comp} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# --- man pages: every *.1, *.3, *.8 in the tree, gzipped as Debian wants ------
# Section 3 goes with the headers, seckill* with seckill, the rest with the
# dlock command. CONFIGURE_DEPENDS: a page added later is picked up at build.
set(deb_man_gz "")
foreach(dir tools src bench docs man)
  file(GLOB_RECURSE pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.[138])
  foreach(page ${pages})
    get_filename_component(name ${page} NAME)
    string(REGEX REPLACE ".*\\.([138])$" "\\1" sect ${name})
    if(sect STREQUAL "3")
      set(comp dev)
    elseif(name MATCHES "^seckill")
      set(comp seckill)
    else()
      set(comp tools)
    endif()
    set(gz ${deb_gen}/man/${name}.gz)
    add_custom_command(OUTPUT ${gz} COMMAND gzip -9nc ${page} > ${gz}
                       DEPENDS ${page} COMMENT "gzip ${name}" VERBATIM)
    list(APPEND deb_man_gz ${gz})
    install(FILES ${gz} DESTINATION share/man/man${sect} COMPONENT ${comp} EXCLUDE_FROM_ALL)
  endforeach()
endforeach()
file(MAKE_DIRECTORY ${deb_gen}/man)
add_custom_target(dlock_deb_manpages ALL DEPENDS ${deb_man_gz})

# --- documentation: what the man pages send readers to ------------------------
# PACKAGE:PATH installs docs/PATH as /usr/share/doc/PACKAGE/PATH (the layout
# of docs/, so the documents' own "docs/X" references read the same). A man
# page names these installed paths; tests/man/check_page.sh checks that each
# one it names is listed here, and tests/install/test_deb.sh that each is
# installed. README.md of the tree goes to every package's directory.
set(deb_docs
  libdlock-dev:locks.md libdlock-dev:locks-family.md libdlock-dev:ops/tls.md
  dlock-tools:cli.md dlock-tools:locks.md
  seckill:http-api.md seckill:openapi.yaml seckill:clients/seckill_client.py seckill:clients/Client.java
  seckill:clients/seckill-client.mjs seckill:clients/README.md seckill:seckill.md seckill:pipeline.md seckill:schema.md
  seckill:design/promise.md seckill:design/seckill-contract.md seckill:BENCHMARKS.md
  seckill:ops/README.md seckill:ops/tls.md seckill:ops/alerts.yml seckill:ops/grafana-dashboard.json)
set(deb_doc_comp_libdlock-dev dev)
set(deb_doc_comp_dlock-tools tools)
set(deb_doc_comp_seckill seckill)
# `cmake --install` installs the same files under its prefix
# (<prefix>/share/doc/PACKAGE/PATH), so the pages' paths hold there too with
# /usr replaced by the prefix; scripts/check-install.sh checks it.
foreach(spec ${deb_docs})
  string(REPLACE ":" ";" spec "${spec}")
  list(GET spec 0 pkg)
  list(GET spec 1 rel)
  get_filename_component(sub ${rel} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/${rel} DESTINATION share/doc/${pkg}/${sub}
          COMPONENT ${deb_doc_comp_${pkg}} EXCLUDE_FROM_ALL)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/${rel} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg}/${sub})
endforeach()
foreach(pkg libdlock-dev dlock-tools seckill)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/${pkg}
          COMPONENT ${deb_doc_comp_${pkg}} EXCLUDE_FROM_ALL)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg})
endforeach()

# --- systemd units and example configuration (seckill) -------------------------
# The example units run /usr/local/bin/...; the packaged ones run /usr/bin/...
file(GLOB units CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/etc/systemd/*.service
                                  ${PROJECT_SOURCE_DIR}/etc/systemd/*.timer
                                  ${PROJECT_SOURCE_DIR}/etc/systemd/*.socket)
foreach(unit ${units})
  get_filename_component(name ${unit} NAME)
  file(READ ${unit} text)
  string(REPLACE "/usr/local/bin/" "/usr/bin/" text "${text}")
  file(CONFIGURE OUTPUT ${deb_gen}/systemd/${name} CONTENT "${text}" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${unit})
  install(FILES ${deb_gen}/systemd/${name} DESTINATION ${deb_unitdir}
          COMPONENT seckill EXCLUDE_FROM_ALL)
endforeach()
# dlock-singleton@.service (dlock-tools): `dlock --standby` for a
# singleton service, one instance per service name.
file(READ ${PROJECT_SOURCE_DIR}/etc/dlock-singleton@.service text)
string(REPLACE "/usr/local/bin/" "/usr/bin/" text "${text}")
file(CONFIGURE OUTPUT ${deb_gen}/systemd/dlock-singleton@.service CONTENT "${text}" @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/etc/dlock-singleton@.service)
install(FILES ${deb_gen}/systemd/dlock-singleton@.service DESTINATION ${deb_unitdir}
        COMPONENT tools EXCLUDE_FROM_ALL)
set(deb_conffiles /etc/dlock/seckilld.conf /etc/dlock/seckill.env.example)
install(FILES ${PROJECT_SOURCE_DIR}/etc/seckilld.conf
              ${PROJECT_SOURCE_DIR}/etc/systemd/seckill.env.example
        DESTINATION /etc/dlock COMPONENT seckill EXCLUDE_FROM_ALL)
string(REPLACE ";" "\n" deb_conffiles "${deb_conffiles}")
file(WRITE ${deb_gen}/seckill/conffiles "${deb_conffiles}\n")
foreach(script postinst postrm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/seckill.${script}
                 ${deb_gen}/seckill/${script} @ONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                  GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()

# --- CPack ----------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/deb)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev tools seckill)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${DLOCK_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
find_program(DPKG_SHLIBDEPS dpkg-shlibdeps)
if(DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  message(STATUS "dpkg-shlibdeps not found (Debian package dpkg-dev): .deb Depends lines "
                 "list only what is written below")
endif()

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libdlock1)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# shlibs for every package holding a shared library (only libdlock1 does).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_COMPONENT_LIB_DESCRIPTION "distributed locks over Redis or etcd (shared library)
 libdlock: simple locks (interoperable with redis-py Lock and node redlock),
 reentrant locks (Redisson's layout), watchdog renewal, fencing tokens, fair
 and read-write locks, semaphores, a rate limiter, RedLock, metrics; on a
 standalone Redis, Sentinel or a Redis Cluster, and the simple lock on etcd.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libdlock1 (= ${DLOCK_DEB_VERSION}), libhiredis-dev, libevent-dev, libssl-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION "distributed locks over Redis or etcd (development files)
 Headers (include/dlock), the static library, dlock.pc for pkg-config, a
 CMake package (find_package(dlock): dlock::dlock, dlock::dlock_static),
 libdlock(3) and the design notes in /usr/share/doc/libdlock-dev.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME dlock-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "redis-server")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "distributed flock(1) over Redis or etcd
 dlock runs a command while holding a lock in Redis (standalone, Sentinel or
 Cluster) or etcd, so only one of your hosts runs a cron job; the lock is
 renewed while the command runs and the command is stopped if the lock is
 lost. dlock torture checks a deployment's locks under paused holders.")

set(CPACK_DEBIAN_SECKILL_PACKAGE_NAME seckill)
set(CPACK_DEBIAN_SECKILL_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SECKILL_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_SECKILL_PACKAGE_RECOMMENDS "redis-server")
set(CPACK_DEBIAN_SECKILL_PACKAGE_SUGGESTS "postgresql, stunnel4")
set(CPACK_DEBIAN_SECKILL_PACKAGE_CONTROL_EXTRA
    "${deb_gen}/seckill/conffiles;${deb_gen}/seckill/postinst;${deb_gen}/seckill/postrm")
set(CPACK_DEBIAN_SECKILL_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_COMPONENT_SECKILL_DESCRIPTION "oversell-proof flash-sale service over Redis and a database
 seckilld decides each purchase in one atomic Redis script (standalone,
 Sentinel or Redis Cluster); seckill-persist
 moves the durable order stream into SQLite or PostgreSQL, where a database
 guard makes overselling impossible; seckill reconciles and exports metrics.
 systemd units, an example configuration (/etc/dlock) and the HTTP API and
 operations documents (/usr/share/doc/seckill) are included; no service is
 enabled until configured.")

include(CPack)
