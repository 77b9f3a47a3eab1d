# env_prefix.cmake — tandem's own environment switches are spelled TANDEM_* only (they were both
# TANDEM_* and TDM_*): no source reads a TDM_ variable. (TDM_ is the prefix of C symbols.)
add_test(NAME style.env_one_prefix COMMAND sh -c
  "cd ${PROJECT_SOURCE_DIR} && if grep -rnE 'getenv\\(\"TDM_|os\\.environ(\\.get)?[[(]\"TDM_' core ref kernels harness suites include; then echo 'switches above are spelled TDM_: use TANDEM_'; exit 1; fi")
