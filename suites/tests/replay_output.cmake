# replay_output.cmake — what `bench replay` prints: failures, the worst error/bound per op and dtype
# and a last line by default; every case with --verbose; no table with --quiet
# (replay_output.sh says each check). README's command 1 ends with that replay.
add_test(NAME replay.output COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/replay_output.sh
         $<TARGET_FILE:bench> ${CASES_DIR} ${TEST_TMP}/replay-output)
