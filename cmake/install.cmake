# What `cmake --install` puts where, and the Debian packages `cpack -G DEB` makes of it
# (docs/cpp.md). Two install components, split as Debian splits a library:
#   runtime      libaddnorm.so.<ABI> and its versioned name          -> libaddnorm<ABI>
#   development  the public headers, libaddnorm.so, libaddnorm.a,
#                the CMake package and addnorm.pc                      -> libaddnorm-dev
include(CMakePackageConfigHelpers)

set(ADDNORM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/addnorm)

install(TARGETS addnorm_shared EXPORT addnormTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_SKIP)
install(TARGETS addnorm_shared EXPORT addnormTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development NAMELINK_ONLY)
install(TARGETS addnorm EXPORT addnormStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)

# The public headers: include/addnorm/*.{hpp,h} and the generated version.hpp. The nn and lab
# headers (include/addnorm/nn, lab) belong to layers that are not installed.
file(GLOB ADDNORM_PUBLIC_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/addnorm/*.hpp
     ${PROJECT_SOURCE_DIR}/include/addnorm/*.h)
install(FILES ${ADDNORM_PUBLIC_HEADERS} ${PROJECT_BINARY_DIR}/include/addnorm/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/addnorm COMPONENT development)

install(EXPORT addnormTargets NAMESPACE addnorm:: DESTINATION ${ADDNORM_CMAKE_DIR}
        COMPONENT development)
install(EXPORT addnormStaticTargets NAMESPACE addnorm:: DESTINATION ${ADDNORM_CMAKE_DIR}
        COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/addnormConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/addnormConfig.cmake
                              INSTALL_DESTINATION ${ADDNORM_CMAKE_DIR})
# A 0.x release promises nothing across minor versions, so 0.1 does not satisfy a request for
# 0.2 nor the reverse; from 1.0 on, SameMajorVersion's rule is what SameMinorVersion checks here
# plus newer minors, which the ABI rule in docs/cpp.md keeps compatible.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(addnorm_compatibility SameMinorVersion)
else()
  set(addnorm_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/addnormConfigVersion.cmake
                                 COMPATIBILITY ${addnorm_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/addnormConfig.cmake
              ${PROJECT_BINARY_DIR}/addnormConfigVersion.cmake
        DESTINATION ${ADDNORM_CMAKE_DIR} COMPONENT development)

# addnorm.pc, relocatable: its prefix is found from where the file lies, so a tree unpacked
# anywhere (dpkg -x, a copied prefix) still gives the right -I and -L.
file(RELATIVE_PATH addnorm_pc_to_prefix ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" addnorm_pc_to_prefix "${addnorm_pc_to_prefix}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/addnorm.pc.in ${PROJECT_BINARY_DIR}/addnorm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/addnorm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT development)

# The Debian packages (scripts/package-deb.sh configures with CMAKE_INSTALL_PREFIX=/usr, so the
# library lands in Debian's multiarch folder).
set(CPACK_PACKAGE_NAME addnorm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Add & Norm for transformers: LayerNorm, RMSNorm, BatchNorm, GroupNorm and fused residuals")
set(CPACK_PACKAGE_CONTACT "addnorm developers <addnorm@users.noreply.github.com>")
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/addnorm/addnorm")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libaddnorm${ADDNORM_ABI_VERSION})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# Its dependencies (libhwy1, libgomp1, libstdc++6, libc6) read from the library by dpkg-shlibdeps,
# and a shlibs file so that packages built against it depend on it in turn.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libaddnorm-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
# The static library and the CMake package's addnorm::static need Highway at a program's link.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libaddnorm${ADDNORM_ABI_VERSION} (= ${PROJECT_VERSION}-1), libhwy-dev")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "addnorm's shared library")
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION
    "addnorm's headers, static library, CMake package and pkg-config file")
include(CPack)
