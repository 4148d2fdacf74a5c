# Runs xian_reproduction in --quick mode with 2 seeds and checks that it exits 0 and prints
# the table of both datasets (the authors' files) with the authors' reference numbers.
# Arguments: -DPROGRAM=<binary> -DWORK_DIR=<dir for the CSVs>.
execute_process(
  COMMAND ${PROGRAM} --quick --seeds 2
    --out ${WORK_DIR}/xian_smoke_per_seed.csv --sweep ${WORK_DIR}/xian_smoke_sweep.csv
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE errors)
message("${output}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "xian_reproduction exited with ${result}:\n${errors}")
endif()
foreach(expected
    "== Law School" "== Communities"
    "bar_pass_prediction.csv" "communities_uci.csv"
    "eps +\\| test MSE +\\| max pairwise KS +\\| authors' MSE +\\| authors' KS"
    "\n  inf +\\| [0-9.]+ ± [0-9.]+ +\\| [0-9.]+ ± [0-9.]+ +\\| 0\\.01044 ± 0\\.00049"
    "\n  10 +\\| [0-9.]+ ± [0-9.]+ +\\| [0-9.]+ ± [0-9.]+ +\\| 0\\.01045"
    "\n  0\\.1 +\\| [0-9.]+ ± [0-9.]+ +\\| [0-9.]+ ± [0-9.]+ +\\| 0\\.01549 ± 0\\.00897")
  if(NOT output MATCHES "${expected}")
    message(FATAL_ERROR "output does not match '${expected}'")
  endif()
endforeach()
file(READ ${WORK_DIR}/xian_smoke_sweep.csv sweep)
if(NOT sweep MATCHES "^epsilon,error,violation,series,")
  message(FATAL_ERROR "unexpected sweep CSV:\n${sweep}")
endif()
