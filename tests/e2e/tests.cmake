# End-to-end tests: each tests/e2e/*.test.mjs is one CTest entry that drives
# real comb-relay processes through nostr-tools and ws under node:test.
#
# They share the `teststack` fixture: e2e/stack-start brings up a private
# PostgreSQL (fsync off) and Redis under ${CMAKE_BINARY_DIR}/teststack and
# migrates the database comb_template; e2e/stack-stop takes them down. Each
# test clones its own database from the template, so the tests run in
# parallel without locks. Any other test that needs the servers can list
# `teststack` in FIXTURES_REQUIRED and read ${CMAKE_BINARY_DIR}/teststack/env.
#
# --test-force-exit ends a test file as soon as its last test has finished,
# even if something it started still holds the event loop; the harness then
# kills what the test started.
#
# Included from tests/CMakeLists.txt.

set(COMB_TEST_STACK_DIR ${CMAKE_BINARY_DIR}/teststack)

find_program(BASH_EXECUTABLE bash REQUIRED)

add_test(NAME e2e/stack-start
  COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/test-stack.sh
          start ${COMB_TEST_STACK_DIR})
set_tests_properties(e2e/stack-start PROPERTIES
  FIXTURES_SETUP teststack
  ENVIRONMENT "COMB_BUILD_DIR=${CMAKE_BINARY_DIR}"
  TIMEOUT 120
  LABELS e2e)

add_test(NAME e2e/stack-stop
  COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/test-stack.sh
          stop ${COMB_TEST_STACK_DIR})
set_tests_properties(e2e/stack-stop PROPERTIES
  FIXTURES_CLEANUP teststack
  TIMEOUT 120
  LABELS e2e)

# Node.js: the one scripts/install-deps.sh unpacked into .tools/node when the
# system's was too old (scripts/node-env.sh), else node on PATH. It must be
# 20.19 or newer: nostr-tools' cryptography needs it.
set(COMB_NODE_MIN 20.19.0)
if(EXISTS ${PROJECT_SOURCE_DIR}/.tools/node/bin/node)
  set(NODE_EXECUTABLE ${PROJECT_SOURCE_DIR}/.tools/node/bin/node CACHE FILEPATH "Node.js for the end-to-end tests" FORCE)
else()
  find_program(NODE_EXECUTABLE node)
endif()
if(NODE_EXECUTABLE)
  execute_process(COMMAND ${NODE_EXECUTABLE} -p process.versions.node
    OUTPUT_VARIABLE NODE_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE node_rc)
  if(NOT node_rc EQUAL 0 OR NODE_VERSION VERSION_LESS COMB_NODE_MIN)
    message(FATAL_ERROR "${NODE_EXECUTABLE} is Node.js '${NODE_VERSION}'; the end-to-end tests need "
      "${COMB_NODE_MIN} or newer: run scripts/install-deps.sh, which puts one in .tools/node")
  endif()
  file(GLOB E2E_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.test.mjs)
  foreach(file ${E2E_TESTS})
    get_filename_component(fname ${file} NAME)
    string(REGEX REPLACE "\\.test\\.mjs$" "" name ${fname})
    add_test(NAME e2e/${name}
      COMMAND ${NODE_EXECUTABLE} --test --test-force-exit --test-reporter=spec ${file}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(e2e/${name} PROPERTIES
      FIXTURES_REQUIRED teststack
      ENVIRONMENT "COMB_BUILD_DIR=${CMAKE_BINARY_DIR};COMB_TEST_STACK=${COMB_TEST_STACK_DIR};COMB_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
      TIMEOUT 300
      LABELS e2e)
  endforeach()
  # Streaming standbys of the fixture's PostgreSQL: comb-capture stamps
  # signals with WAL positions only while one streams from it, which
  # e2e/capture checks with its own standby and without any; the tests
  # that start one take turns.
  set_tests_properties(e2e/capture e2e/convergence e2e/standby e2e/standby_ws
    PROPERTIES RESOURCE_LOCK pg_standby)
  # comb-client's unit tests: a fake fetch, no relay
  add_test(NAME unit/comb-client
    COMMAND ${NODE_EXECUTABLE} --test --test-reporter=spec ${PROJECT_SOURCE_DIR}/clients/js/test/
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(unit/comb-client PROPERTIES
    TIMEOUT 60
    LABELS unit)
else()
  message(WARNING "node not found: end-to-end tests are not registered (run scripts/install-deps.sh)")
endif()

# Static checks of the container files: Docker cannot run on CI machines.
add_test(NAME static/compose
  COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check-compose.sh)
set_tests_properties(static/compose PROPERTIES
  TIMEOUT 60
  LABELS static)

add_test(NAME static/readme-config
  COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check-readme-config.sh ${CMAKE_BINARY_DIR})
set_tests_properties(static/readme-config PROPERTIES
  TIMEOUT 60
  LABELS static)
