# memdata.cmake — memory accounting and the data loader (test_memdata.c).
tdm_test_executable(memdata)
add_test(NAME memory.stats COMMAND test_memdata memory)
add_test(NAME data.loader COMMAND test_memdata loader)
# Restarts and frees mid-epoch with worker threads: a hang is a failure, not a stuck ctest.
add_test(NAME data.loader_restart COMMAND test_memdata restart)
set_tests_properties(memory.stats data.loader PROPERTIES TIMEOUT 60)
set_tests_properties(data.loader_restart PROPERTIES TIMEOUT 30)
