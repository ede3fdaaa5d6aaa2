# `latte serve`'s tests (tests/server/, label `server`): curl, the official
# openai npm client, the load and fault run, a conversation past the
# context, and the chat page in headless Chromium. They need node (Debian's
# nodejs) and, for the page, chromium (scripts/setup.sh --test); the npm
# packages are installed into the build folder by the server_node_setup
# fixture (the npm registry must be reachable once).
# The pure parts (stop strings, UTF-8, the key comparison): GoogleTest.
add_executable(test_server tests/server/text_stream_test.cpp)
target_include_directories(test_server PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_server PRIVATE latte_server latte_internal ${LATTE_GTEST_MAIN})
add_test(NAME server_units COMMAND test_server)
set_tests_properties(server_units PROPERTIES LABELS server)

find_program(LATTE_NODE node)
find_program(LATTE_CURL curl)
if(NOT LATTE_NODE OR NOT LATTE_CURL)
  message(STATUS "latte: server tests not registered: node or curl not found (scripts/setup.sh --test)")
  return()
endif()
set(_srv_test ${PROJECT_SOURCE_DIR}/tests/server/server_test.sh)
set(_srv_node ${PROJECT_BINARY_DIR}/server-node)
set(_srv_model ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf)
add_test(NAME server_node_setup COMMAND bash ${PROJECT_SOURCE_DIR}/tests/server/setup_node.sh ${_srv_node})
set_tests_properties(server_node_setup PROPERTIES FIXTURES_SETUP server_node LABELS server TIMEOUT 300)
set(_srv_parts curl queue openai load context)
find_program(LATTE_CHROMIUM chromium)
if(LATTE_CHROMIUM)
  list(APPEND _srv_parts page)
else()
  message(STATUS "latte: the chat page's test not registered: chromium not found (scripts/setup.sh --test)")
endif()
foreach(part ${_srv_parts})
  add_test(NAME server_${part} COMMAND bash ${_srv_test} $<TARGET_FILE:latte_cli> ${_srv_model} ${part} ${_srv_node})
  # Each starts its own server on a free port; RUN_SERIAL keeps the load
  # run's timing and memory figures its own.
  set_tests_properties(server_${part} PROPERTIES FIXTURES_REQUIRED server_node LABELS server TIMEOUT 180 RUN_SERIAL ON)
endforeach()
# Under the sanitizers the allocator's quarantine holds freed memory: the
# load run reports resident memory there without bounding it.
if(LATTE_SANITIZE)
  set_tests_properties(server_load PROPERTIES ENVIRONMENT "LATTE_TEST_RSS_UNBOUNDED=1")
endif()
