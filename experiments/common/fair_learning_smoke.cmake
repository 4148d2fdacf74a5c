# Smoke run of jagielski_fig1, em_adult, stochastic_fair_repro or tradeoff_adult
# (-DWHICH=fig1|em|fermi|tradeoff) in --quick mode: must exit 0, print its tables and write its
# CSV. Arguments: -DPROGRAM=<binary> -DWORK_DIR=<dir>.
# All but em_adult write into WORK_DIR.
set(args --quick --out-dir ${WORK_DIR})
if(WHICH STREQUAL "fig1")
  set(csv ${WORK_DIR}/jagielski_fig1_communities.csv)
  set(expected
    "### communities \\(1994 rows, 121 features"
    "### adult \\(32561 train rows, 16281 test rows"
    "\n\\| 1 \\| [0-9.]+ ± [0-9.]+ / [0-9.]+ ± [0-9.]+ \\| [0-9.]+ ± [0-9.]+ / [0-9.]+ ± [0-9.]+ \\|"
    "\n\\| ∞ \\(no noise\\) \\| [0-9.]+ ± [0-9.]+ / [0-9.]+ ± [0-9.]+ \\|")
  set(csv_head "^dataset,method,epsilon,rounds,seed,error,violation\n")
elseif(WHICH STREQUAL "fermi")
  set(csv ${WORK_DIR}/stochastic_fair_repro.csv)
  set(cell "[0-9.]+ / [0-9.]+")
  set(expected
    "### adult, DP-FERMI, demographic parity \\(ε = 1, δ = 1e-05, 1 seed\\)"
    "adult.data \\(train, 32561 rows\\) and adult.test \\(test, 16281 rows\\)"
    "\n\\| 0 \\| 0\\.158 / 0\\.202 \\| ${cell} \\| ${cell} \\|"
    "\n\\| 1 \\| 0\\.187 / 0\\.010 \\| ${cell} \\| ${cell} \\|"
    "### credit, DP-FERMI, demographic parity"
    "### parkinsons, DP-FERMI, demographic parity"
    "### parkinsons_no_motor, DP-FERMI, demographic parity"
    "### adult, DP-FERMI, equalized odds"
    "\n\\| 0 \\| 0\\.165 / 0\\.229 \\| ${cell} \\| ${cell} \\|"
    "### adult, PF-LD, demographic parity"
    "\n\\| – \\| 0\\.183 / 0\\.061 \\| ${cell} \\| ${cell} \\|")
  set(csv_head "^dataset,fairness,algorithm,config,epsilon,lambda,seed,error,dp_violation,eo_violation,positive_rate,noise_multiplier,job_seconds,config_detail\nadult,dp,dp_fermi,paper,1,0,0,")
elseif(WHICH STREQUAL "tradeoff")
  set(csv ${WORK_DIR}/tradeoff_adult_sweep_dp.csv)
  set(number "[0-9.]+")
  set(expected
    "### Privacy / fairness trade-off on Adult \\(sex\\) \\(32561 train rows, 16281 test rows"
    "\n\\| DP-FERMI λ=2.5 \\| 9 \\| ${number} \\| ${number} \\| ${number} \\| [0-9.e+-]+ \\| ${number} \\|"
    "\n\\| PF-LD \\| 1 \\| ${number} \\| ${number} \\| ${number} \\| [0-9.e+-]+ \\| ${number} \\|"
    "\n\\| DP-oracle learner T=5 \\| 9 \\| ${number} \\| ${number} \\| ${number} \\|  \\| ${number} \\|"
    "\n\\| EO post-processor \\| ∞ \\(no noise\\) \\| ${number} \\|"
    "\n\\| logistic regression \\(non-private\\) \\| ∞ \\(no noise\\) \\| ${number} \\|")
  set(csv_head "^series,epsilon,error,violation,error_lo,error_hi,violation_lo,violation_hi\nDP-FERMI λ=0,1,")
else()
  set(args --quick --out ${WORK_DIR}/em_smoke.csv --md ${WORK_DIR}/em_smoke.md)
  set(csv ${WORK_DIR}/em_smoke.csv)
  set(expected
    "= 200 candidates \\(train utility"
    "all in one table and every FitFairModel job"
    "\n\\| 0\\.25 \\| 2/2 \\|"
    "\n\\| 2 \\| 0/2 \\| [0-9]+ ± [0-9]+ \\| [0-9.]+ ± [0-9.]+ \\| [0-9.]+ ± [0-9.]+ \\|"
    "\n\\| ∞ \\(best train utility")
  set(csv_head "^epsilon,seed,chosen,released_m,train_utility,error,tpr_gap,eo_violation\n")
endif()
execute_process(
  COMMAND ${PROGRAM} ${args}
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE errors)
message("${output}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${result}:\n${errors}")
endif()
foreach(pattern ${expected})
  if(NOT output MATCHES "${pattern}")
    message(FATAL_ERROR "output does not match '${pattern}'")
  endif()
endforeach()
file(READ ${csv} content)
if(NOT content MATCHES "${csv_head}")
  message(FATAL_ERROR "unexpected CSV ${csv}:\n${content}")
endif()
